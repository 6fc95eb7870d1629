"""The `amoeba` command: `amoeba SUBCOMMAND [--flags] [args]`; `--flagfile=FILE` works everywhere.

Dispatch only: each subcommand lives in `experiments/commands/NAME.py` with its own flags.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from absl import app, flags

import experiments.commands

COMMANDS = tuple(sorted(m.name for m in pkgutil.iter_modules(experiments.commands.__path__)))


def usage() -> str:
    return f"usage: amoeba {{{','.join(COMMANDS)}}} [--flags] [args]   (amoeba SUBCOMMAND --help)"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point; exits 2 on a usage error, 1 on bad input."""
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(usage(), file=sys.stderr)
        sys.exit(2)
    name = argv[1]
    command = importlib.import_module(f"experiments.commands.{name}")
    if "--help" in argv[2:] or "-h" in argv[2:]:
        print(f"{command.__doc__.strip()}\n\n{command.FLAGS.get_help()}")
        return
    command.FLAGS.unparse_flags()  # a second run() in one process starts from the defaults
    try:
        rest = command.FLAGS([f"amoeba {name}"] + argv[2:])
    except flags.Error as err:
        print(f"amoeba {name}: {err}\n(amoeba {name} --help lists the flags)", file=sys.stderr)
        sys.exit(2)
    try:
        command.main(rest[1:])
    except app.UsageError as err:
        print(f"amoeba {name}: {err}", file=sys.stderr)
        sys.exit(1)
