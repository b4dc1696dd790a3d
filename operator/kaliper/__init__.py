"""Kaliper: which configuration serves this model within its latency SLO at the lowest cost?"""

__version__ = "0.1.0"
