"""The one call grammar every mode shares, and the value grammars it is built from."""
