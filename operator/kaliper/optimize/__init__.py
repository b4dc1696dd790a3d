"""The ModelOptimization engine."""
