"""kopf handlers, thin: they read the resource, call the pure builders, apply, and write status."""
