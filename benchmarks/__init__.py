"""The bulkops benchmark harness: ``python -m benchmarks.run`` (see benchmarks/README.md)."""
