"""What a run writes: the Markdown report and terminal tables, plots, and MLflow tracking."""
