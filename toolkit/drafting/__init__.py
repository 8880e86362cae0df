"""Draft sources for verified speculation: n-gram tables (ExSpec), call forecasts, acceptance."""
