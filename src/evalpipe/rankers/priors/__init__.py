"""Priors: re-ordering rules that several rankers apply (tests last, module units after declarations)."""
