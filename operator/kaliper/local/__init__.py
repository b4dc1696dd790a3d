"""The local runtime: the same specs on one machine, with processes and real cgroup limits."""
