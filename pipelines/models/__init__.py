"""Saving, loading and training the job forecasters (one per job kind) and the scheduler-history forecaster."""
