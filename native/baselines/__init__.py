"""Baselines the benchmarks compare against: llama-cpp-python's grammar path and caches."""
