"""bulkops.service."""
