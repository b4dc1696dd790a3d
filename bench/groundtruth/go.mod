module kaliper.dev/bench/groundtruth

go 1.25
