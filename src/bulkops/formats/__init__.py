"""bulkops.formats."""
