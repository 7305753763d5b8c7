"""The queue a plan starts from, one module per side: ``shipped`` (the trace + generated LLM jobs), ``store`` (exports)."""
