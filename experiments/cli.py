"""The `amoeba` command: `amoeba SUBCOMMAND [--flags] [args]`; `--flagfile=FILE` works everywhere.

Dispatch, and the CLI's logging, set up once: our packages' `log.info` lines reach stderr, and
TensorFlow's C++ start-up chatter (absl's InitializeLog notice, oneDNN, CPU features) does not,
unless `--verbosity=1` (any subcommand) asks for everything. Each subcommand lives in
`experiments/commands/NAME.py` with its own flags; one that sets USES_TENSORFLOW has TensorFlow
imported here first.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys

from absl import app, flags

import experiments.commands
from experiments.settings import OUR_PACKAGES

COMMANDS = tuple(sorted(m.name for m in pkgutil.iter_modules(experiments.commands.__path__)))


def _pop_verbosity(argv: list[str]) -> int:
    """Remove `--verbosity=N` (or `--verbosity N`) from argv; N, 0 when absent."""
    for i, arg in enumerate(argv):
        if arg == "--verbosity" and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i:i + 2]
        elif arg.startswith("--verbosity="):
            value = arg.split("=", 1)[1]
            del argv[i]
        else:
            continue
        try:
            return int(value)
        except ValueError:
            print(f"amoeba: --verbosity: an integer, got {value!r}", file=sys.stderr)
            sys.exit(2)
    return 0


def set_up_logging(verbosity: int) -> None:
    """Our loggers at INFO (DEBUG from verbosity 1) on stderr; TensorFlow's C++ logs at warnings
    and up (everything from verbosity 1), unless TF_CPP_MIN_LOG_LEVEL is already set."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in OUR_PACKAGES:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.DEBUG if verbosity > 0 else logging.INFO)
        logger.propagate = False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbosity > 0 else "2")


def import_tensorflow_quietly() -> None:
    """Import TensorFlow with stderr closed: what its C++ side prints while loading comes before
    any log level applies (absl's InitializeLog notice, oneDNN's note)."""
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def summary(name: str) -> str:
    """A subcommand's SUMMARY line, read from its source (importing them all would import TensorFlow)."""
    import ast
    import importlib.util

    origin = importlib.util.find_spec(f"experiments.commands.{name}").origin
    with open(origin, encoding="utf-8") as f:
        for node in ast.parse(f.read()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SUMMARY" for t in node.targets):
                return ast.literal_eval(node.value)
    return ""


def usage() -> str:
    lines = ["usage: amoeba SUBCOMMAND [--flags] [args]   (amoeba SUBCOMMAND --help lists its flags)", ""]
    lines += [f"  {name:<10} {summary(name)}" for name in COMMANDS]
    return "\n".join(lines)


def unknown_subcommand(name: str) -> str:
    """One line for a subcommand that does not exist, with the nearest one when it is close."""
    import difflib

    near = difflib.get_close_matches(name, COMMANDS, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return f"amoeba: unknown subcommand {name!r}{hint}; amoeba --help lists them: {', '.join(COMMANDS)}"


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point; exits 2 on a usage error, 1 on bad input."""
    argv = list(sys.argv if argv is None else argv)
    verbosity = _pop_verbosity(argv)
    if len(argv) >= 2 and argv[1] in ("--help", "-h", "help"):
        print(usage())
        return
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(usage() if len(argv) < 2 else unknown_subcommand(argv[1]), file=sys.stderr)
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
    set_up_logging(verbosity)
    if verbosity == 0 and getattr(command, "USES_TENSORFLOW", False):
        import_tensorflow_quietly()
    try:
        command.main(rest[1:])
    except app.UsageError as err:
        print(f"amoeba {name}: {err}", file=sys.stderr)
        sys.exit(1)
