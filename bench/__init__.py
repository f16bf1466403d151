"""Benchmarks of the Canvas Run Service (`make bench`); figures and commands are kept in docs/benchmarks.md."""
