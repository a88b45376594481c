"""Helpers the tests share, and the benchmarks that drive the window too.

Tests import them as ``support.<module>`` (tests/ is on pytest's path); the
benchmarks, run from the repository root, as ``tests.support.<module>``.
"""
