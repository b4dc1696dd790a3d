"""Kaliper's load generator: Locust as a library, HDR histograms, open-loop schedules, a stopping rule.

Run it in-process (`run_load`), as a container entrypoint (`python -m kaliper.loadgen`), or distributed
(one Locust master, N workers: pods on Kubernetes, processes on one machine).
"""
