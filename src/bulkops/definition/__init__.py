"""bulkops.definition."""
