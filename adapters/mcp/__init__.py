"""MCP: server configs, persistent sessions, conversion of tools and results, the hub."""
