"""The trial worker's hang watchdog, in a real process."""

import subprocess
import sys
import time

from experiments.trial import HANG_EXIT_CODE
from tests.conftest import REPO

HANGS = "from experiments.trial import start_watchdog; import time; start_watchdog(0.5, 'trial 3'); time.sleep(60)"
FINISHES = ("from experiments.trial import start_watchdog; import time; "
            "done = start_watchdog(0.5, 'trial 3'); done.set(); time.sleep(1.5)")


def test_a_hung_trial_ends_its_worker_with_the_reason():
    t0 = time.time()
    result = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == HANG_EXIT_CODE
    assert "amoeba watchdog: trial 3 still running after 0.5 s; ending its worker" in result.stderr
    assert time.time() - t0 < 50


def test_a_finished_trial_is_left_alone():
    result = subprocess.run([sys.executable, "-c", FINISHES], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0 and "watchdog" not in result.stderr
