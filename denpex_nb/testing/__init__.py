"""Tooling for the tests and benchmarks (synthetic dumps, the external torchfrtrace): never imported by the library."""
