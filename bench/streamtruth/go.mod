module kaliper.dev/bench/streamtruth

go 1.25
