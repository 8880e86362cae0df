"""`python -m toolweave.adapters.serve [OPTIONS]`: the server without the `toolweave` command."""

from toolweave.adapters.serve.command import main

main()
