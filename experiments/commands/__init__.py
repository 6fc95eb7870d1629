"""One module per `amoeba` subcommand.

Each module owns its flags in its own `FLAGS = flags.FlagValues()` (so subcommands never clash)
and has `main(args)`, taking the positional arguments left after flag parsing. A command raises
`app.UsageError` for bad input; it must not parse sys.argv itself.
"""
