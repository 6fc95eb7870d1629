"""A setting is one field of a config dataclass: its absl flag, its Python keyword and whether a
resumed run compares it all come from that field's declaration.

What a field's `metadata` may say (all optional):

- `help`: the flag's help text (a field with a flag needs one, here or in `define_flags(help=...)`).
- `flag`: False: no flag (a setting only Python gives, or one a command fills in itself);
  a string: the flag's name, when it differs from the field's.
- `choices`: the values a string field takes: its flag is an enum.
- `api`: False: not a keyword of `experiments.api.search` (a setting of the proxy trainer only).
- `on_resume`: "compared" (the default: a rerun with another value is refused), "journal" (what the
  algorithm is built from: the journal's own record compares it, as the algorithm sees it) or
  "free" (how the run goes, not what it finds: time limits, resources, where results go).
- `flatten` (a nested config dataclass, e.g. ProxyConfig): its fields are flags of their own,
  with `rename` ({field: flag}), `choices` and `help` ({field: ...}, beside its own metadata),
  `skip` (fields with no flag), `shared` ({field: outer field} that takes the outer field's value,
  e.g. the proxy's seed is the search's), `free` (fields a rerun may change) and `resolve`
  ({field: function of the nested config} compared instead of the value).

Types: bool, int, float, str (an enum with choices), `X | None`, and `tuple[X, ...]` (a list
flag, each item read as X, errors naming the flag). A field of another type needs `flag: False`.
This module must not import TensorFlow or Ray.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from typing import Any, Callable, Iterator, Mapping

from absl import app, flags

# our packages: their loggers (cli.py), the code Ray ships by value (search/driver.py, api.py)
OUR_PACKAGES = ("core", "evolution", "experiments", "searchspace", "trainer")

COMPARED, JOURNAL, FREE = "compared", "journal", "free"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One flag of a config class: the field it sets (`path`: ("proxy", "epochs") for a nested one)."""

    path: tuple[str, ...]
    flag: str
    kind: type  # bool, int, float or str; a list flag's items
    is_list: bool
    default: Any
    help: str
    choices: tuple[Any, ...] | None


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # each class of the MRO's names in its own module


def _kind(hint: Any, where: str) -> tuple[type, bool]:
    """(item type, is a list) of a field's type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        return _kind(next(a for a in args if a is not type(None)), where)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = args[0] if args[0] in (bool, int, float, str) else str
        return item, True
    if hint in (bool, int, float, str):
        return hint, False
    raise TypeError(f"{where}: a field of type {hint} has no flag type; give it metadata flag=False")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def settings_of(cls: type, *, help: Mapping[str, str] | None = None, rename: Mapping[str, str] | None = None,
                skip: tuple[str, ...] = (), choices: Mapping[str, Any] | None = None,
                _prefix: tuple[str, ...] = ()) -> Iterator[Setting]:
    """The flags of `cls`'s fields, nested configs flattened. `help`, `rename`, `choices` and `skip`
    (by field name) stand in for metadata a class of another package does not carry."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if f.name in skip or meta.get("flag", True) is False:
            continue
        if "flatten" in meta:
            nested = meta["flatten"]
            yield from settings_of(hints[f.name], rename=nested.get("rename"), choices=nested.get("choices"),
                                   help=nested.get("help"), skip=(
                *nested.get("skip", ()), *nested.get("shared", {})), _prefix=(*_prefix, f.name))
            continue
        where = f"{cls.__name__}.{f.name}"
        kind, is_list = _kind(hints[f.name], where)
        text = (help or {}).get(f.name) or meta.get("help")
        if not text:
            raise TypeError(f"{where}: a flag needs help text (field metadata 'help')")
        name = (rename or {}).get(f.name) or (meta["flag"] if isinstance(meta.get("flag"), str) else f.name)
        options = (choices or {}).get(f.name, meta.get("choices"))
        yield Setting((*_prefix, f.name), name, kind, is_list, _default(f), text,
                      tuple(options) if options is not None else None)


def define_flags(cls: type, values: flags.FlagValues, *, deprecated: Mapping[str, str] | None = None,
                 module_name: str | None = None, **how: Any) -> list[Setting]:
    """Define one absl flag per setting of `cls` in `values` (defaults and choices the field's own;
    `module_name`: the module `--help` lists them under); `deprecated` ({old flag: flag}) also
    defines each old spelling, read by `apply_deprecated` with a warning. Returns the settings, for
    `flag_settings`."""
    settings = list(settings_of(cls, **how))
    by_flag = {s.flag: s for s in settings}
    module = {"module_name": module_name or cls.__module__}
    for s in settings:
        _define(s.flag, s, s.default, s.help, values, module)
    for old, new in (deprecated or {}).items():
        _define(old, by_flag[new], None, f"Deprecated: --{new}.", values, module)
    return settings


def _define(name: str, s: Setting, default: Any, text: str, values: flags.FlagValues, module: dict) -> None:
    F = {"flag_values": values, **module}
    if s.is_list:
        shown = None if default is None else [f"{v:g}" if isinstance(v, float) else str(v) for v in default]
        flags.DEFINE_list(name, shown, text, **F)
    elif s.choices is not None:
        flags.DEFINE_enum(name, default, [str(c) for c in s.choices], text, **F)
    else:
        define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
                  str: flags.DEFINE_string}[s.kind]
        define(name, default, text, **F)


def _items(s: Setting, items: list[str]) -> tuple[Any, ...]:
    if s.kind is str:
        return tuple(items)
    try:
        return tuple(s.kind(item) for item in items)
    except ValueError:
        kind = {int: "whole numbers", float: "numbers"}.get(s.kind, s.kind.__name__)
        raise ValueError(f"{s.flag}: {items} are not {kind}") from None


def apply_deprecated(values: flags.FlagValues, deprecated: Mapping[str, str], command: str) -> None:
    """An old spelling given: a warning on stderr, and its value moved to the flag's own name."""
    for old, new in deprecated.items():
        if values[old].value is not None:
            print(f"amoeba {command}: --{old} is deprecated; use --{new}", file=sys.stderr)
            if values[new].present:
                raise app.UsageError(f"--{old} and --{new} are the same flag; give --{new} only")
            values[new].value = values[old].value


def flag_settings(settings: list[Setting], values: flags.FlagValues,
                  parse: Mapping[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """The fields the flags set, nested ones as dicts ({"proxy": {"epochs": 4}}); `parse` ({flag:
    function of the value}) reads a flag its own way. A list item that is not its type raises
    ValueError naming the flag."""
    out: dict[str, Any] = {}
    for s in settings:
        value = values[s.flag].value
        if (parse or {}).get(s.flag):
            value = parse[s.flag](value)
        elif s.is_list and value is not None:
            value = _items(s, value)
        target = out
        for part in s.path[:-1]:
            target = target.setdefault(part, {})
        target[s.path[-1]] = value
    return out


def build(cls: type, fields: Mapping[str, Any]) -> Any:
    """`cls(**fields)`, nested configs built from their dicts, shared fields given the outer value."""
    hints, kwargs = _hints(cls), dict(fields)
    for f in dataclasses.fields(cls):
        nested = f.metadata.get("flatten")
        if nested is not None and isinstance(kwargs.get(f.name), Mapping):
            inner = dict(kwargs[f.name])
            for name, outer in nested.get("shared", {}).items():
                if outer in kwargs:
                    inner[name] = kwargs[outer]
            kwargs[f.name] = build(hints[f.name], inner)
    return cls(**kwargs)


def keywords(cls: type) -> dict[str, Any]:
    """The fields Python callers (experiments.api.search) give as keywords, with their defaults
    (dataclasses.MISSING for a required one)."""
    return {f.name: (f.default if f.default_factory is dataclasses.MISSING else f.default_factory())
            for f in dataclasses.fields(cls) if f.metadata.get("api", True) and "flatten" not in f.metadata}


def changed_settings(cls: type, saved: Mapping[str, Any], now: Any, _prefix: str = "") -> list[str]:
    """The compared settings (not "journal" nor "free" ones) that differ between a saved run's
    settings (its JSON: a setting it lacks had its default then; one it has that `cls` no longer
    knows is ignored) and `now`, each as "name: before before, now now"."""
    changed = []
    for f in dataclasses.fields(cls):
        mode = f.metadata.get("on_resume", COMPARED)
        if mode != COMPARED:
            continue
        before = saved.get(f.name, _default(f))
        value = getattr(now, f.name)
        nested = f.metadata.get("flatten")
        if nested is not None:
            changed += _changed_nested(type(value), nested, before, value, f"{_prefix}{f.name} ")
        elif as_json(before) != as_json(value):
            changed.append(f"{_prefix}{f.name}: {before!r} before, {value!r} now")
    return changed


def _changed_nested(cls: type, nested: Mapping[str, Any], saved: Mapping[str, Any] | Any, now: Any,
                    prefix: str) -> list[str]:
    saved = saved if isinstance(saved, Mapping) else dataclasses.asdict(saved)
    renamed = nested.get("renamed", {})  # a field saved under its old name
    saved = {renamed.get(k, k): v for k, v in saved.items()}
    known = {f.name for f in dataclasses.fields(cls)}
    before = build(cls, {k: v for k, v in saved.items() if k in known})
    free = set(nested.get("free", ()))
    changed = []
    for f in dataclasses.fields(cls):
        if f.name in free or f.metadata.get("on_resume", COMPARED) != COMPARED:
            continue
        resolve = nested.get("resolve", {}).get(f.name, lambda config, name=f.name: getattr(config, name))
        then, value = resolve(before), resolve(now)
        if as_json(then) != as_json(value):
            changed.append(f"{prefix}{f.name}: {then!r} before, {value!r} now")
    return changed


def as_json(value: Any) -> Any:
    """A value as its JSON would read back: tuples as lists (a saved setting compares to a live one)."""
    if isinstance(value, (tuple, list)):
        return [as_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: as_json(v) for k, v in value.items()}
    return value
