"""bulkops.cli."""
