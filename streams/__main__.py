"""`python -m streams` is the `rumourmill` command."""

from streams.cli import main

main()
