"""The `toolweave` command line."""
