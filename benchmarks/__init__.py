"""Benchmarks of rumourmill: each module measures one figure against a baseline in the same run.

Run them all with `python -m benchmarks [--quick]`, or one with `python -m benchmarks.NAME`.
"""
