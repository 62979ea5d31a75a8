"""What keeps a run safe: one-line errors, secret masking, signals and per-query timeouts."""
