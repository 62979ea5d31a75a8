"""The LLM relevance judge: rescue misses the fixture's labels cannot see, cached and calibrated.

Gold fixtures are incomplete, so a strict miss may be the fixture's fault rather
than the ranker's. After strict scoring, a judge model is asked whether unlabelled
candidates answer the query; judged figures are reported beside the strict ones,
never instead of them, and the positive verdicts can be reviewed and merged back
into the fixture (`evalpipe merge-judgements`).

Modules: settings (config), prompt (versioned prompt file), backends (OpenAI-compatible
and Anthropic clients), verdict (parsing answers), cache (SQLite), pairs (what is
asked), asking (pool, budget, cache), judged_metrics, calibration, report, run (the
app's entry points), merge (verdicts back into a fixture).
"""
