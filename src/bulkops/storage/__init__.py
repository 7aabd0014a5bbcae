"""Storage: ports (Protocols), records, states, and one adapter per backend."""
