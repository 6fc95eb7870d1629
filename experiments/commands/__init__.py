"""One module per `amoeba` subcommand.

Each module owns its flags in its own `FLAGS = flags.FlagValues()` (so subcommands never clash)
and has `main(args)`, taking the positional arguments left after flag parsing. A command raises
`app.UsageError` for bad input; it must not parse sys.argv itself.
"""


def whole_numbers(name: str, items: list[str]) -> list[int]:
    """A list flag's items as integers; the ValueError names the flag."""
    try:
        return [int(item) for item in items]
    except ValueError:
        raise ValueError(f"{name}: {items} are not whole numbers") from None
