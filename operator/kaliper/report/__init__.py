"""Reports: one schema for the CR status, `kaliper run`'s JSON and the HTML report."""
