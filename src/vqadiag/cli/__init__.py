"""The ``vqadiag`` command line: thin Typer wrappers over the Python API."""
