"""python -m memsnap ARGS: the same as the memsnap command."""
from ._cli import main

main()
