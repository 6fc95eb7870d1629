"""amoeba show NAME_OR_JSON [--format=text|json|dot|svg|png --output=FILE]: a genotype, readably or drawn.

NAME_OR_JSON: a reference name (cells: amoebanet_a, amoebanet_d, nasnet_a; convnets: airbench94,
resnet9), a JSON string, a JSON
file (a genotype, or a search's best_genotype.json), or a search's output dir (its best genotype). text lists the blocks, json is the genotype's
JSON, dot is Graphviz source of both cells, svg and png are drawn by Graphviz's `dot` (Debian's
`graphviz` package). Written to --output, or to stdout (png needs --output).
"""

from __future__ import annotations

SUMMARY = "print or draw a genotype (a reference name or a JSON file)"  # for `amoeba --help`

import json
import os
import sys

from absl import app, flags

from searchspace import CONVNET_REFERENCES, ConvNetGenotype, NasNetGenotype, genotype_from_json
from searchspace.references import REFERENCES

NAMED = {**REFERENCES, **CONVNET_REFERENCES}  # the genotypes a name gives

FLAGS = flags.FlagValues()
flags.DEFINE_enum("format", "text", ["text", "json", "dot", "svg", "png"], "What to print or draw.",
                  flag_values=FLAGS)
flags.DEFINE_string("output", None, "Write here instead of stdout.", flag_values=FLAGS)


def load_genotype(text: str) -> NasNetGenotype | ConvNetGenotype:
    """A reference name, a JSON string, or a path to a JSON file; ValueError says which failed."""
    if text in NAMED:
        return NAMED[text]
    if os.path.isdir(text):  # a search's output dir: its best genotype
        best = os.path.join(text, "best_genotype.json")
        if not os.path.isfile(best):
            raise ValueError(f"{text}: a directory without best_genotype.json; give a search's output dir, "
                             f"a genotype JSON file or a reference name ({', '.join(sorted(NAMED))})")
        text = best
    if os.path.exists(text):
        with open(text, encoding="utf-8") as f:
            source, raw = text, f.read()
    else:
        source, raw = (repr(text) if len(text) <= 40 else "the argument"), text
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{source}: neither a reference name ({', '.join(sorted(NAMED))}), "
            f"nor a JSON file, nor JSON ({err})"
        ) from None
    if isinstance(data, dict) and "genotype" in data:
        data = data["genotype"]
    try:
        return genotype_from_json(data)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def main(args: list[str]) -> None:
    if len(args) != 1:
        raise app.UsageError("usage: amoeba show NAME_OR_JSON")
    try:
        genotype = load_genotype(args[0])
    except ValueError as err:
        raise app.UsageError(str(err)) from None
    fmt = FLAGS.format
    if fmt == "text":
        out: str | bytes = f"{genotype.describe()}\nkey: {genotype.key()}\n"
    elif fmt == "json":
        out = json.dumps(genotype.to_json(), indent=2) + "\n"
    elif not isinstance(genotype, NasNetGenotype):
        raise app.UsageError(f"--format={fmt}: only cells are drawn; show a {type(genotype).__name__} as text or json")
    else:
        from experiments.report.cell_graph import GraphvizMissing, genotype_dot, render

        out = genotype_dot(genotype, title=os.path.basename(args[0]) if len(args[0]) < 80 else "")
        if fmt != "dot":
            if fmt == "png" and not FLAGS.output:
                raise app.UsageError("--format=png needs --output=FILE")
            try:
                out = render(out, fmt)
            except GraphvizMissing as err:
                raise app.UsageError(str(err)) from None
    if FLAGS.output:
        with open(FLAGS.output, "wb") as f:
            f.write(out.encode() if isinstance(out, str) else out)
        print(f"wrote {FLAGS.output}")
    else:
        sys.stdout.write(out if isinstance(out, str) else out.decode())
