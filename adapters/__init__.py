"""The edges of toolweave: LangChain (`langchain/`), MCP (`mcp/`), the command line
(`cli/`), the benchmarks (`bench/`) and the bundled demo MCP servers (`demo_servers/`).

Public names are imported from `toolweave` itself, e.g. ``from toolweave import
ChatToolweave, MCPHub``.
"""
