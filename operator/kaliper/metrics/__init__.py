"""Resource metrics: NVML for GPUs on this machine (Prometheus and DCGM come with the operator)."""
