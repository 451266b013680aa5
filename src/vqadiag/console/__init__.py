"""The command-line kit the commands share: the Typer applications, common options,
error handling and output (``vqadiag.cli`` assembles the commands)."""
