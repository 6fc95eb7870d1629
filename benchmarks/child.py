"""Run one measurement in a fresh Python process (as a search trial runs) and read its figures.

The child is the benchmark script itself with worker arguments; it prints its figures as JSON on
its last line. Shared by the benchmark scripts; it measures nothing itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(script: str, args: list[str]) -> dict:
    """`python SCRIPT ARGS...` from the repo root, TensorFlow quiet; its last line as JSON."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO})
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(script)} {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
