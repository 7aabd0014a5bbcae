"""The gateway's HTTP routes, one module per kind of routing."""
