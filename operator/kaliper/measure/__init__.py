"""Measurement leaves every package may use: HDR latency histograms, percentiles with their intervals, and
the CPU a process may use and has used. The load generator records with them, the decisions judge with
them, the optimizer times with them."""
