"""`kaliper run`: the same specs on one machine, with processes and real cgroup limits."""
