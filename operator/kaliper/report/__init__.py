"""Reports: one schema for the CR status, the local runtime's JSON and the HTML report."""
