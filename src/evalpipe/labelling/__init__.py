"""Growing a fixture: pool several runs' unlabelled candidates and label them in a local page
(`evalpipe pool`, `evalpipe label`; docs/growing_fixtures.md)."""
