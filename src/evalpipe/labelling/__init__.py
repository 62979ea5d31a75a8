"""Growing a fixture: pool several runs' unlabelled candidates, label them in a local page (docs/growing_fixtures.md)."""
