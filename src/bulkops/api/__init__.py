"""bulkops.api."""
