"""Benchmark scripts; a package so tests can import the code under ``benchmarks/moe/``."""
