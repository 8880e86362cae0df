"""toolweave."""
