"""bulkops: bulk operations as a service."""
