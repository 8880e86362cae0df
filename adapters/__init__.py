"""The edges of toolweave: the command line (MCP and LangChain adapters come next)."""
