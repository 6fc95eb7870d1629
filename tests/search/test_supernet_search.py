"""End to end: `amoeba search --evaluator=supernet` on prepared JPEGs, SIGKILLed while its supernet
trains, then resumed to the end through Ray Tune."""

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

from evolution import resume
from tests.conftest import AMOEBA, QUIET_TF, amoeba_here, wait_for_text


@pytest.mark.integration
def test_a_supernet_search_killed_while_its_supernet_trains_resumes_it_and_scores_every_trial(cifar_mini, tmp_path,
                                                                                          shared_ray):
    _, data = cifar_mini
    out = str(tmp_path / "supernet_search")
    search = ["search", f"--output_dir={out}", f"--data={data}", "--space=convnet", "--evaluator=supernet",
              "--image_size=16", "--validation_images=100", "--train_images=256", "--train_batch_size=32",
              "--epochs=2", "--max_trials=6", "--population_size=3", "--sample_size=2", "--max_concurrent=1",
              "--initial=airbench94", "--max_params=2500000", "--supernet_sandwich=2"]  # a smaller trace
    checkpoint = os.path.join(out, "supernet", "checkpoint.npz")
    proc = subprocess.Popen(AMOEBA + search, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=QUIET_TF)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not os.path.exists(checkpoint):
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray task training the supernet
        proc.wait()
    assert os.path.exists(checkpoint) and not os.path.exists(os.path.join(out, "supernet", "supernet.json")), \
        "the kill came too late to leave the supernet half trained"

    result = amoeba_here(*search)
    assert "6 trials done (0 failed)" in result.stdout, result.stdout
    trained = json.load(open(os.path.join(out, "supernet", "supernet.json")))
    assert trained["epochs"] == 2 and trained["frame"]["stages"][1] == {"width": 256, "convs": 2, "residual": 2}
    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert set(table.status) <= {"ok", "infeasible"} and (table.status == "ok").sum() >= 4
    scored = table[table.status == "ok"]
    assert scored.val_accuracy.between(0, 1).all() and (scored.latency_ms > 0).all()
    assert set(scored.validation_images) == {100} and (scored.params <= 2_500_000).all()
    journal = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    assert {o.metrics.get("evaluator") for o in journal.outcomes.values() if o.status == "ok"} == {"supernet"}
    assert all(len(t.genotype.stages) == 3 and t.genotype.activation == "gelu" for t in journal.trials.values())
    again = amoeba_here(*search)  # all done: nothing trained or scored again
    assert "all 6 trials already done" in again.stdout
