"""Scoring prediction files: one function per ``vqadiag score`` command (reads the files,
calls the pure metrics, returns the dict the command prints with ``--json``)."""
