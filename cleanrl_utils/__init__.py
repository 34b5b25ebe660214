"""Plumbing shared by the single-file scripts in cleanrl/: run records, evaluation, progress."""
