"""The `amoeba` command: experiment configs, orchestration through Ray Tune, results tables.

This package wires the other three together; it must not implement search algorithms or models.
"""
