"""`python -m toolweave`: the command line, as the `toolweave` console entry runs it."""

from toolweave.adapters.cli.launch import main

main()
