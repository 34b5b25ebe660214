"""Plumbing shared by the single-file scripts in cleanrl/ (see docs/layout.md). Importing it, or
any of its modules but `entry` (the scripts' first import), changes no global state."""
