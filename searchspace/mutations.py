"""Mutations as objects a space draws from (PyGlove's mutators), and the draw every space shares.

Each space keeps one table of its mutations, name -> object (`NASNET_MUTATIONS` in
searchspace/nasnet.py, `NASBENCH201_MUTATIONS`, `CHOICE_MUTATIONS`), and a `mutations` setting
naming the entries it uses. To mutate a parent the space picks the place to change (for NASNet:
a cell, a block and one of its two elements, uniformly), then draws one of its mutations with
`draw`, whose `apply` makes the change and says what it did. A new mutation is one class and one
table entry; a space uses it once its `mutations` setting names it (docs/extending-space.md).

The default `mutations` of each space is what it drew before mutations were objects, and `draw`
makes the same random call the old code made, so seeded searches and old journals replay alike.

Pure Python: this module must not import TensorFlow or Ray, nor use a global random state.
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence


def draw(names: Sequence[str], rng: random.Random) -> str:
    """One of `names`, uniformly. One `rng.random()` call when there are two or more (with two,
    the first is drawn when it is below 0.5), none when there is one."""
    if len(names) == 1:
        return names[0]
    return names[min(int(rng.random() * len(names)), len(names) - 1)]


def check_mutations(names: Sequence[str], table: Mapping[str, Any]) -> tuple[str, ...]:
    """`names` as a tuple; a ValueError naming the `mutations` setting when it is empty, repeats a
    name or names one that is not in `table`."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValueError(f"mutations: need a list of mutation names, got {names!r}; known: {list(table)}")
    names = tuple(names)
    unknown = [name for name in names if name not in table]
    if unknown:
        raise ValueError(f"mutations: unknown {unknown[0]!r}; known: {list(table)}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"mutations: need one or more distinct names, got {list(names)}")
    return names


def mutations_config(names: tuple[str, ...], default: tuple[str, ...]) -> dict[str, Any]:
    """The `mutations` entry of a space's `to_config()`: none for the default, so the configs (and
    journals) of spaces made before the setting existed stay as they were."""
    return {} if names == default else {"mutations": list(names)}
