"""The Python API: read files, call the pure metrics, return JSON-ready results.

Each function mirrors one ``vqadiag`` command and returns the same dict that the
command prints with ``--json``.
"""
