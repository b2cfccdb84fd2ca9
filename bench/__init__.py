"""Benchmarks: throughput, latency, memory and recall quality (``python -m bench``)."""
