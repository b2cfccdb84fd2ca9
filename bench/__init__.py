"""Benchmarks of the daemon's memory layers, run against data kept outside the repository."""
