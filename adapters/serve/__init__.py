"""`toolweave serve`: an OpenAI-compatible chat-completions server on the local model.

`create_app(Backend(...), ServeConfig(...))` is the ASGI app; `serve` the command."""
