"""Report schema, HTML page, plots and model comparison."""
