"""The ``vqadiag`` command line: thin wrappers over :mod:`vqadiag.api`."""
