"""``python -m vqadiag`` runs the command line."""

from vqadiag.cli.main import main

main()
