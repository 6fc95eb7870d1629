"""A genotype's cells drawn as graphs: Graphviz DOT source (plain text, no dependency), and SVG or
PNG through Graphviz's `dot` program (Debian's `graphviz` package), which this module runs.

Each cell is a cluster: its two inputs (h0: the cell before last, h1: the last), one box per op
with an edge from the hidden state it reads, a node per block's sum (h2, h3, ...), and the
concatenated output. This module must not import TensorFlow.
"""

from __future__ import annotations

import shutil
import subprocess

from searchspace.nasnet import CELL_NAMES, NasNetGenotype

RENDERED_FORMATS = ("svg", "png")


class GraphvizMissing(RuntimeError):
    """Graphviz's `dot` program is not installed."""


def genotype_dot(genotype: NasNetGenotype, title: str = "") -> str:
    """DOT source of both cells of `genotype`, side by side."""
    lines = ["digraph genotype {", '  rankdir=TB; node [fontname="Helvetica", fontsize=11];',
             f'  label="{_escape(title)}"; labelloc=t;' if title else ""]
    for name in CELL_NAMES:
        cell = genotype.cell(name)
        p = name[0]  # node ids unique per cell: n_h2, r_h2, ...
        lines += [f"  subgraph cluster_{name} {{", f'    label="{name} cell"; style=rounded;',
                  f'    {p}_h0 [label="h0 (cell k-2)", shape=ellipse, style=filled, fillcolor="#dbe9f6"];',
                  f'    {p}_h1 [label="h1 (cell k-1)", shape=ellipse, style=filled, fillcolor="#dbe9f6"];']
        for i, block in enumerate(cell.blocks):
            h = i + 2
            lines.append(f'    {p}_h{h} [label="h{h}", shape=circle, style=filled, fillcolor="#fde9c9"];')
            for e, (source, op) in enumerate(zip(block.inputs, block.ops)):
                lines.append(f'    {p}_op{h}_{e} [label="{_escape(op)}", shape=box, style=rounded];')
                lines.append(f"    {p}_h{source} -> {p}_op{h}_{e}; {p}_op{h}_{e} -> {p}_h{h};")
        lines.append(f'    {p}_out [label="concat", shape=ellipse, style=filled, fillcolor="#d5ecd4"];')
        lines += [f"    {p}_h{h} -> {p}_out;" for h in cell.concat]
        lines.append("  }")
    lines.append("}")
    return "\n".join(line for line in lines if line) + "\n"


def render(dot_source: str, fmt: str) -> bytes:
    """`dot_source` as SVG or PNG bytes, by Graphviz's `dot`; GraphvizMissing says how to get it."""
    if fmt not in RENDERED_FORMATS:
        raise ValueError(f"format: {fmt!r} is not one of {list(RENDERED_FORMATS)}")
    program = shutil.which("dot")
    if program is None:
        raise GraphvizMissing("drawing needs Graphviz's `dot` program, which is not installed: "
                              "`apt-get install graphviz` (Debian/Ubuntu, as root; `make install` does it "
                              "when it can), or use --format=dot for the source")
    result = subprocess.run([program, f"-T{fmt}"], input=dot_source.encode(), capture_output=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
