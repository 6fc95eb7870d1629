"""experiments.api.search with a function of one's own: what it reports, returns, raises or forgets."""

import json
import logging
import os
import signal
import threading
import time

import pytest
from ray import tune

from evolution import resume
from experiments import api
from searchspace import ChoiceSpace

SPACE = ChoiceSpace({"x": [0, 1, 2, 3], "kind": ["ok", "raises", "silent", "forgets", "epochs", "hangs"]})


def train(config: dict):
    genotype = config["genotype"]
    if genotype["kind"] == "raises":
        raise RuntimeError(f"no good at x={genotype['x']}")
    if genotype["kind"] == "ok":
        return {"score": float(genotype["x"]), "width": 10 * genotype["x"]}
    if genotype["kind"] == "forgets":
        return {"accuracy": 0.5}  # not the objective
    if genotype["kind"] == "epochs":  # reports as it trains; the last report counts
        for epoch in range(3):
            tune.report({"loss": 1.0 / (epoch + 1), **({"score": 1.5} if epoch == 2 else {})})
        return None
    if genotype["kind"] == "hangs":
        time.sleep(120)
    return None  # reports nothing


@pytest.mark.integration
def test_a_search_of_ones_own_records_results_failures_and_seeds(tmp_path, shared_ray, capsys):
    out = str(tmp_path / "mine")
    seeds = [{"x": 3, "kind": "ok"}, SPACE.genotype({"x": 1, "kind": "raises"}),
             SPACE.genotype({"x": 2, "kind": "silent"}), {"x": 0, "kind": "forgets"}, {"x": 0, "kind": "epochs"},
             {"x": 0, "kind": "hangs"}]
    results, best = api.search(train, SPACE, output_dir=out, max_trials=6, population_size=3, sample_size=2,
                               objective="score", initial=seeds, max_consecutive_failures=0, cpus_per_trial=1,
                               trial_timeout_s=3, hang_grace_s=0)  # the watchdog ends a hung trial's worker at 3 s
    assert best.trial_id == 0 and best.genotype == SPACE.genotype(seeds[0]) and best.metrics["width"] == 30
    assert list(results.mutation) == ["initial"] * 6 and list(results.status) == ["ok", "failed", "failed",
                                                                                  "failed", "ok", "failed"]
    errors = dict(zip(results.trial_id, results.error))
    assert errors[1].startswith("RuntimeError: no good at x=1 (at test_api.py:")
    assert errors[2].startswith("the training function returned without reporting its metrics")
    assert errors[3].startswith("the trial finished without reporting 'score' (it reported ['accuracy'")
    assert results.loss[4] == pytest.approx(1 / 3) and results.score[4] == 1.5
    assert errors[5].startswith("timeout: trial 5 still running after 3 s (hung)")
    assert "width" in results.columns and os.path.exists(os.path.join(out, "results.csv"))
    assert json.load(open(os.path.join(out, "best_genotype.json")))["genotype"] == {"x": 3, "kind": "ok"}
    journal = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    assert journal.initial == (SPACE.genotype(seeds[0]), seeds[1], seeds[2], *map(SPACE.genotype, seeds[3:]))

    capsys.readouterr()
    again, _ = api.search(train, SPACE, output_dir=out, max_trials=6, population_size=3, sample_size=2,
                          objective="score", initial=seeds, max_consecutive_failures=0)
    assert again.equals(results)  # all done: nothing run again
    assert f"resumed {out}: 6 trials done" in capsys.readouterr().err
    with pytest.raises(ValueError, match="holds a different search .*sample_size"):
        api.search(train, SPACE, output_dir=out, max_trials=6, population_size=3, sample_size=3,
                   objective="score", initial=seeds)


@pytest.mark.integration
def test_ctrl_c_ends_a_step_that_never_reports_and_returns_the_results_so_far(tmp_path, shared_ray, capsys, caplog):
    started = tmp_path / "started"

    def blocks(config: dict):  # one long step, no report: Tune alone would wait 10 s for it to stop
        started.write_text("yes")
        time.sleep(120)

    def ctrl_c_once_it_trains() -> None:
        while not started.exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_it_trains, daemon=True).start()
    out = str(tmp_path / "stopped")
    with caplog.at_level(logging.INFO, logger="experiments.search.driver"):
        results, best = api.search(blocks, SPACE, output_dir=out, max_trials=2, population_size=2, sample_size=2,
                                   objective="score", cpus_per_trial=1, max_concurrent=1)
    assert best is None and list(results.status) == ["pending"]  # returned, not raised; in flight, not failed
    assert "its worker is ended" in caplog.text
    assert "call search() again with the same output_dir to resume" in capsys.readouterr().err
    assert resume(os.path.join(out, "journal.jsonl"), read_only=True).pending() == [0]
