"""The docs cannot drift: every `amoeba` command and flag that README.md and docs/*.md show in a code
block exists (each subcommand's own `--help` lists it), every `make` target and example script they
run is there, every relative link points at a file, and `amoeba --help` lists every subcommand."""

import functools
import glob
import os
import re
import shlex

import pytest

from experiments.cli import COMMANDS
from tests.conftest import REPO, amoeba

PAGES = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]
EVERYWHERE = {"flagfile", "verbosity", "help"}  # the `amoeba` command's own flags, in every subcommand
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def code_blocks(page: str) -> list[str]:
    return FENCE.findall(open(page, encoding="utf-8").read())


def commands(block: str) -> list[str]:
    """Each command line of a shell block, continuation lines (after a backslash, or indented under
    an `amoeba` line) joined, comments dropped."""
    joined: list[str] = []
    continued = False
    for line in block.splitlines():
        text = line.split(" #")[0].rstrip() if not line.lstrip().startswith("#") else ""
        if continued or (line[:1].isspace() and joined and joined[-1].split()[:1] == ["amoeba"] and text.strip()):
            joined[-1] += " " + text.strip().rstrip("\\")
        elif text.strip():
            joined.append(text.strip().rstrip("\\").removeprefix("$ ").removeprefix(".venv/bin/"))
        continued = text.endswith("\\")
    return joined


@functools.lru_cache(maxsize=None)
def flags_of(subcommand: str) -> frozenset[str]:
    """The flags `amoeba SUBCOMMAND --help` lists (a boolean also as noFLAG)."""
    shown = amoeba(subcommand, "--help").stdout
    names = set()
    for negatable, name in re.findall(r"^\s+--(\[no\])?([a-z0-9_]+):", shown, re.M):
        names |= {name, f"no{name}"} if negatable else {name}
    return frozenset(names)


def shown_commands() -> list[tuple[str, str]]:
    return [(os.path.relpath(page, REPO), command) for page in PAGES for block in code_blocks(page)
            for command in commands(block)]


def test_every_amoeba_command_and_flag_in_the_docs_exists():
    checked, wrong = 0, []
    for page, command in shown_commands():
        words = command.split()
        if words[0] != "amoeba" or len(words) < 2:
            continue
        if words[1] not in COMMANDS:
            wrong.append(f"{page}: `{command}`: no subcommand {words[1]!r}")
            continue
        for flag in re.findall(r"(?<![\w/-])--([a-z][a-z0-9_]*)", command):
            checked += 1
            if flag not in flags_of(words[1]) | EVERYWHERE:
                wrong.append(f"{page}: `amoeba {words[1]} --{flag}`: no such flag")
    assert not wrong, "\n".join(wrong)
    assert checked > 100  # the docs do show commands, and the parser finds their flags


def test_make_targets_example_scripts_and_links_in_the_docs_exist():
    makefile = open(os.path.join(REPO, "Makefile")).read()
    wrong = []
    for page, command in shown_commands():
        words = shlex.split(command, comments=True) if "'" not in command else command.split()
        if words[:1] == ["make"]:
            wrong += [f"{page}: make {t}" for t in words[1:] if "=" not in t and not re.search(rf"^{t}:", makefile, re.M)]
        if words[:1] == ["python"] and words[1].endswith(".py") and not os.path.exists(os.path.join(REPO, words[1])):
            wrong.append(f"{page}: {words[1]} does not exist")
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", open(page, encoding="utf-8").read()):
            if not re.match(r"[a-z]+://", target) and not os.path.exists(os.path.join(os.path.dirname(page), target)):
                wrong.append(f"{os.path.relpath(page, REPO)}: link to {target}, which does not exist")
    assert not wrong, "\n".join(wrong)


def test_amoeba_help_lists_every_subcommand_with_a_line_on_what_it_does():
    shown = amoeba("--help").stdout
    for name in COMMANDS:
        line = next((l for l in shown.splitlines() if l.split()[:1] == [name]), "")
        assert len(line.split()) >= 4, f"amoeba --help: no line for {name}"


@pytest.mark.parametrize("page", ["README.md"])
def test_the_readme_is_a_page_a_newcomer_reads_in_five_minutes(page):
    words = len(open(os.path.join(REPO, page), encoding="utf-8").read().split())
    assert words < 1300, f"{page}: {words} words (about 250 a minute)"


def test_the_photo_example_is_one_example_in_the_readme_and_the_reference():
    """The README's `prepare --train_dir=photos` example and docs/commands.md's are the same commands."""
    shown = {}
    for page in ("README.md", os.path.join("docs", "commands.md")):
        blocks = [b for b in code_blocks(os.path.join(REPO, page)) if "prepare --train_dir=photos --eval" in b]
        assert len(blocks) == 1, f"{page}: {len(blocks)} photo examples"
        shown[page] = commands(blocks[0])
    assert shown["README.md"] == shown[os.path.join("docs", "commands.md")]
