"""bulkops.examples."""
