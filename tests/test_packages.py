"""The packages keep their labels: no import circle among our modules, and what each package's
docstring says it does not import, it does not import (read from the source, and seen in fresh
interpreters)."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys

from tests.conftest import REPO

PACKAGES = ("core", "searchspace", "evolution", "trainer", "experiments")
TF = ("tensorflow", "keras")
# Of our packages, what each may import besides itself (experiments/ wires them all together).
OURS_ALLOWED = {"core": {"searchspace"}, "searchspace": set(), "evolution": {"searchspace"},
                "trainer": {"core", "searchspace"}, "experiments": set(PACKAGES)}
RAY_FREE = ("core", "searchspace", "evolution", "trainer")  # but RAY_ALLOWED
RAY_ALLOWED = {"evolution.tune_searcher"}
# experiments/ in the pipeline's steps: a step imports itself, the steps before it and the top's
# foundation, never a later step or the command line (cli, api, commands) above them all.
STEPS = {"tracking": (), "search": ("tracking",), "promote": ("tracking", "search"),
         "report": ("tracking", "search", "promote"), "simulate": ()}
FOUNDATION = {"experiments", "experiments.settings", "experiments.layout", "experiments.units"}
# calibration seeds its search with a reference cell, read as `amoeba show` reads one
STEP_EXCEPTIONS = {("experiments.search.calibration", "experiments.commands.show")}


def _module_files() -> dict[str, str]:
    """Our modules by dotted name (a package by its own name) -> file."""
    found = {}
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(REPO, package)):
            for name in names:
                if name.endswith(".py"):
                    parts = os.path.relpath(os.path.join(folder, name), REPO)[:-3].split(os.sep)
                    found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = os.path.join(folder, name)
    return found


def _imports(module: str, path: str, ours: set[str], top_level_only: bool = False) -> set[str]:
    """What `module` imports, at the top or inside a function: our modules by dotted name (`from
    pkg import name` counts as importing pkg.name when that is a module, else pkg), others by
    their top-level name."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name if alias.name in ours else alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base not in ours:
                found.add(base.split(".")[0])
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in ours else base)
    return found - {module}


@functools.lru_cache(maxsize=2)
def import_graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """Each of our modules -> everything it imports (see _imports)."""
    files = _module_files()
    return {m: _imports(m, path, set(files), top_level_only) for m, path in files.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each group of our modules that import each other (Tarjan's strongly
    connected components), as [a, b, ..., a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:  # recursion depth is bounded by the number of our modules
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module] & graph.keys()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))
    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_circle_in(group, graph) for group in groups]


def _circle_in(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest circle from the group's first module back to it, through the group."""
    start = group[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module] & set(group)):
                if imported == start:
                    return paths[module] + [start]
                if imported not in paths:
                    paths[imported] = paths[module] + [imported]
                    following.append(imported)
        frontier = following
    raise AssertionError(f"no circle in the group {group}")


def _fresh_imports(groups: dict[str, list[str]]) -> dict[str, set[str]]:
    """Per group: the top-level names in sys.modules after importing its modules in a fresh
    interpreter (one per group, all started at once)."""
    runs = {}
    for group, modules in groups.items():
        probe = f"import sys, {', '.join(modules)}; print(' '.join(sorted(sys.modules)))"
        runs[group] = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
    loaded = {}
    for group, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"import {', '.join(groups[group])} failed:\n{err[-2000:]}"
        loaded[group] = {name.split(".")[0] for name in out.split()}
    return loaded


def _not_imported(module: str, anywhere: bool) -> set[str]:
    """What `module` must not import, by the package docstrings: with `anywhere`, not even inside a
    function; else not when it is imported. TensorFlow: only trainer/, and experiments/ inside
    functions. Ray: not core, searchspace, evolution (but evolution.tune_searcher) or trainer. Our
    packages: only those in OURS_ALLOWED."""
    package = module.split(".")[0]
    names = set(PACKAGES) - OURS_ALLOWED[package] - {package}
    if package != "trainer" and not (package == "experiments" and anywhere):
        names |= set(TF)
    if package in RAY_FREE and module not in RAY_ALLOWED:
        names.add("ray")
    return names


def test_the_circle_finder_names_a_circle_through_a_function_level_import(tmp_path):
    path = tmp_path / "b.py"
    path.write_text("import os\n\ndef f():\n    from pkg import a\n")
    graph = {"pkg.a": {"pkg.b"}, "pkg.b": _imports("pkg.b", str(path), {"pkg", "pkg.a", "pkg.b"}), "pkg.c": set()}
    assert graph["pkg.b"] == {"os", "pkg.a"}
    assert import_circles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_our_modules_import_no_circle():
    circles = {" -> ".join(circle) for circle in import_circles(import_graph())}
    assert not circles, "import circles (module-level and function-level imports):\n" + "\n".join(sorted(circles))


def test_each_package_imports_only_what_its_docstring_allows():
    wrong = {}
    for anywhere in (True, False):
        for module, imported in import_graph(top_level_only=not anywhere).items():
            if found := sorted(i for i in imported if i.split(".")[0] in _not_imported(module, anywhere)):
                wrong[module, "anywhere" if anywhere else "at import"] = found
    assert wrong == {}


def test_each_step_of_experiments_imports_no_later_step_and_not_the_command_line():
    wrong = {}
    for module, imported in import_graph().items():
        parts = module.split(".")
        if module in FOUNDATION:
            allowed = FOUNDATION
        elif parts[0] == "experiments" and len(parts) > 1 and parts[1] in STEPS:
            allowed = FOUNDATION | {f"experiments.{step}" for step in (parts[1], *STEPS[parts[1]])}
        else:
            continue
        if found := sorted(i for i in imported if i.startswith("experiments") and (module, i) not in STEP_EXCEPTIONS
                           and i not in allowed and ".".join(i.split(".")[:2]) not in allowed):
            wrong[module] = found
    top = os.path.join(REPO, "experiments")
    subpackages = [n for n in os.listdir(top) if os.path.isfile(os.path.join(top, n, "__init__.py"))]
    assert sorted(subpackages) == sorted(set(STEPS) | {"commands"})
    assert wrong == {}


def test_every_trainer_module_imports_tensorflow_as_trainer_says():
    graph = import_graph(top_level_only=True)

    def reaches_tf(module: str, seen: frozenset[str] = frozenset()) -> bool:
        imported = graph[module]
        return bool(imported & set(TF)) or any(reaches_tf(m, seen | {module}) for m in imported
                                               if m.startswith("trainer.") and m not in seen)
    without = [m for m in graph if m.startswith("trainer.") and not reaches_tf(m)]
    assert without == []


def test_importing_a_module_in_a_fresh_interpreter_loads_only_what_its_package_allows():
    # evolution.tune_searcher imports Ray (2.5 s), so the source check above is all it gets
    modules = sorted(m for m in _module_files() if m.split(".")[0] != "trainer" and m not in RAY_ALLOWED)
    assert {"experiments.search.driver", "experiments.api"} <= set(modules)  # the search driver, above all
    groups = {}  # one interpreter per package and rule, all at once; a group that fails, module by module
    for module in modules:
        groups.setdefault((module.split(".")[0], frozenset(_not_imported(module, False))), []).append(module)
    failed = [m for key, loaded in _fresh_imports(groups).items() if loaded & key[1] for m in groups[key]]
    wrong = {m: sorted(loaded & _not_imported(m, False))
             for m, loaded in _fresh_imports({m: [m] for m in failed}).items() if loaded & _not_imported(m, False)}
    assert wrong == {}


def test_a_search_dir_names_no_module_of_ours_so_moving_one_keeps_old_dirs_resuming(tmp_path):
    # a search dir holds settings, genotypes and results, never a module path (as a pickle would):
    # a search made before experiments/ was in steps resumes as before
    from experiments.search.driver import SearchConfig, open_search

    config = SearchConfig(output_dir=str(tmp_path), max_trials=5, population_size=4, sample_size=2)
    algorithm = open_search(config)
    trial = algorithm.ask()
    algorithm.close()
    written = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir() if p.is_file()}
    assert {"journal.jsonl", "search_config.json"} <= set(written)
    module = re.compile(rf"\b({'|'.join(PACKAGES)})\.[a-z_]+")
    assert {name: module.findall(text) for name, text in written.items() if module.search(text)} == {}
    resumed = open_search(config)
    assert resumed.ask() == trial
    resumed.close()
