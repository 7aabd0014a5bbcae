"""Built-in example operations, served when no operations are configured."""
