"""Structure: rankers that walk the code graph (relations between units) for relational questions."""
