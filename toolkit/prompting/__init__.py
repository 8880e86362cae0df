"""Prompts: chat-template rendering, ToolRAG selection, PromptWeaver's cacheable layout."""
