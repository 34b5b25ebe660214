"""Plumbing shared by the single-file scripts in cleanrl/ (see docs/layout.md)."""

from cleanrl_utils import extras

extras.install()  # a missing optional dependency: one line saying what to install
