"""Pure builders: Kaliper specs in, Kubernetes object dicts out. No I/O."""
