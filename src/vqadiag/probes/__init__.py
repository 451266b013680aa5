"""Diagnostic conditions, batching, the prediction store and resume."""
