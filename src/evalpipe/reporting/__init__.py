"""What a run writes: its saved output directory, the Markdown report and terminal tables, the
MLflow description and params it records, plots. Talking to MLflow is `evalpipe.tracking`."""
