"""The `perfsuite` subcommands: argparse and I/O only, each delegating to its stage."""
