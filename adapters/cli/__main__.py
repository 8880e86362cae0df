"""`python -m toolweave.adapters.cli`: the command line without the console entry."""

from toolweave.adapters.cli.app import main

main()
