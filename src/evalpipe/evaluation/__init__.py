"""One evaluation as named stages over one run state (check, open store, reuse, start, measure,
judge, record, upload, report): `app.evaluate` lists them, each can be read and tested alone."""
