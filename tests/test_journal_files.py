"""The journal as a file: a torn last line, damage and errors named by line, one writer at a time
(a killed one leaves no lock), and what two drivers on one journal wrote."""

import json
import logging
import os
import random
import signal
import subprocess
import sys

import pytest

from evolution import JournalError, JournalLock, JournalLocked, RandomSearch, RegularizedEvolution, resume
from searchspace import NasNetSpace
from tests.conftest import run_fake

SPACE = NasNetSpace()


def test_torn_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    path = str(tmp_path / "j.jsonl")
    algorithm = RandomSearch(SPACE, seed=9, journal_path=path)
    run_fake(algorithm, 5)
    algorithm.close()
    with open(path, "a") as f:
        f.write('{"event": "tell", "trial_id": 4, "sta')
    with caplog.at_level(logging.WARNING):
        resumed = resume(path)
    assert "torn last line" in caplog.text
    assert resumed.completed() == 5
    run_fake(resumed, 1)  # appends after the repaired end
    resumed.close()
    assert resume(path).completed() == 6


def test_a_new_search_refuses_an_existing_journal(tmp_path):
    path = str(tmp_path / "j.jsonl")
    run_fake(RandomSearch(SPACE, seed=1, journal_path=path), 1)
    with pytest.raises(FileExistsError, match="resume"):
        RandomSearch(SPACE, seed=1, journal_path=path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda lines: lines.__setitem__(0, lines[0].replace('"version":1', '"version":9')), r":1: journal version 9"),
        (lambda lines: lines.__setitem__(0, lines[0].replace('"random"', '"annealing"')), r":1: bad start event"),
        (lambda lines: lines.insert(2, '{"event":"pause"}'), r":3: unknown event 'pause'"),
        (lambda lines: lines.insert(2, '{"event":"tell","trial_id":0,"status":"ok"}'), r":4: tell for a trial not pending"),
        (lambda lines: lines.pop(0), r":1: the journal does not begin with a start event"),
        (lambda lines: lines.__setitem__(3, lines[3][:20]), r"j.jsonl:4: damaged journal line"),
        (lambda lines: lines.__setitem__(0, json.dumps({**json.loads(lines[0]), "seed": 12})), r":2: replay diverged"),
    ],
)
def test_every_journal_error_names_its_line(tmp_path, edit, message):
    path = str(tmp_path / "j.jsonl")
    run_fake(RandomSearch(SPACE, seed=3, journal_path=path), 3)
    lines = open(path).read().splitlines()
    edit(lines)
    open(path, "w").write("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=message):
        resume(path)


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    path = str(tmp_path / "j.jsonl")
    first = RandomSearch(SPACE, seed=4, journal_path=path)
    run_fake(first, 2)
    with pytest.raises(JournalLocked, match=rf"j.jsonl is in use by another process \(pid {os.getpid()} on host "):
        resume(path)
    assert resume(path, read_only=True).completed() == 2  # reading needs no lock
    first.close()
    second = resume(path)
    assert second.completed() == 2
    second.close()


def test_a_killed_writer_leaves_no_lock_behind(tmp_path):
    path = str(tmp_path / "j.jsonl")
    holder = subprocess.run(
        [sys.executable, "-c", "import os, signal, sys; from evolution import JournalLock; "
         f"JournalLock({path!r}); os.kill(os.getpid(), signal.SIGKILL)"],
        cwd=os.path.dirname(os.path.dirname(__file__)))
    assert holder.returncode == -signal.SIGKILL and os.path.exists(path + ".lock")
    JournalLock(path).release()  # taken at once


def _two_drivers_journal(path):
    """What two drivers on one journal wrote: both resumed after trial 2, both asked trials 3 and
    4, both told 3; the second driver's trial 4 is another cell."""
    algorithm = RegularizedEvolution(SPACE, population_size=3, sample_size=2, seed=13, journal_path=path)
    run_fake(algorithm, 3)
    algorithm.close()
    lines = open(path).read().splitlines()
    first = resume(path)
    run_fake(first, 2)
    first.close()
    mine = open(path).read().splitlines()[len(lines):]
    theirs = [line for line in mine if '"trial_id":4' not in line or '"ask"' not in line]
    other = json.loads(next(line for line in mine if '"ask"' in line and '"trial_id":4' in line))
    other["genotype"] = SPACE.sample(random.Random(99)).to_json()
    theirs.insert(2, json.dumps(other))
    open(path, "w").write("\n".join(lines + [x for pair in zip(mine, theirs) for x in pair]) + "\n")
    return mine


def test_a_journal_two_drivers_wrote_is_readable_first_result_counting(tmp_path, caplog):
    path = str(tmp_path / "j.jsonl")
    _two_drivers_journal(path)
    with pytest.raises(JournalError, match="replay diverged|not pending"):
        resume(path)
    with caplog.at_level(logging.WARNING):
        algorithm = resume(path, read_only=True)
    assert "asked again; skipped" in caplog.text and "told again" in caplog.text
    assert sorted(algorithm.outcomes) == [0, 1, 2, 3, 4] and not algorithm.pending()
