"""bulkops.engine."""
