"""amoeba show NAME_OR_JSON: print a genotype readably.

NAME_OR_JSON: a reference name (amoebanet_a, amoebanet_d, nasnet_a), a JSON string, or a JSON
file (a genotype, or a search's best_genotype.json).
"""

from __future__ import annotations

import json
import os

from absl import app, flags

from searchspace import NasNetGenotype
from searchspace.references import REFERENCES

FLAGS = flags.FlagValues()


def load_genotype(text: str) -> NasNetGenotype:
    """A reference name, a JSON string, or a path to a JSON file; ValueError says which failed."""
    if text in REFERENCES:
        return REFERENCES[text]
    if os.path.exists(text):
        with open(text, encoding="utf-8") as f:
            source, raw = text, f.read()
    else:
        source, raw = "argument", text
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{source}: neither a reference name ({', '.join(sorted(REFERENCES))}), "
            f"nor a JSON file, nor JSON ({err})"
        ) from None
    if isinstance(data, dict) and "genotype" in data:
        data = data["genotype"]
    try:
        return NasNetGenotype.from_json(data)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def main(args: list[str]) -> None:
    if len(args) != 1:
        raise app.UsageError("usage: amoeba show NAME_OR_JSON")
    try:
        genotype = load_genotype(args[0])
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    print(genotype.describe())
    print(f"key: {genotype.key()}")
