"""Checkpoint retention for sweeps.

``retention`` decides which checkpoints a sweep keeps (pure functions, no I/O); ``gc`` reads a
sweep's storage, turns the decision into a plan and applies it. Nothing is imported here, so
importing the package stays cheap.
"""
