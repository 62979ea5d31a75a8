"""`evalpipe gate`: did this change make retrieval worse than the baseline, per tier, beyond noise,
on the same data? Exit 0 (no regression), 1 (regression), 2 (cannot compare). See docs/gate.md."""
