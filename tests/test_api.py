"""experiments.api.search with a function of one's own: what it reports, returns, raises or forgets."""

import json
import os

import pytest

from evolution import resume
from experiments import api
from searchspace import ChoiceSpace

SPACE = ChoiceSpace({"x": [0, 1, 2, 3], "kind": ["ok", "raises", "silent"]})


def train(config: dict):
    genotype = config["genotype"]
    if genotype["kind"] == "raises":
        raise RuntimeError(f"no good at x={genotype['x']}")
    if genotype["kind"] == "ok":
        return {"score": float(genotype["x"]), "width": 10 * genotype["x"]}
    return None  # reports nothing


@pytest.mark.integration
def test_a_search_of_ones_own_records_results_failures_and_seeds(tmp_path):
    out = str(tmp_path / "mine")
    seeds = [{"x": 3, "kind": "ok"}, SPACE.genotype({"x": 1, "kind": "raises"}),
             SPACE.genotype({"x": 2, "kind": "silent"})]
    results, best = api.search(train, SPACE, output_dir=out, max_trials=5, population_size=3, sample_size=2,
                               objective="score", initial=seeds, max_consecutive_failures=0, cpus_per_trial=1)
    assert best.trial_id == 0 and best.genotype == SPACE.genotype(seeds[0]) and best.metrics["width"] == 30
    assert list(results.mutation[:3]) == ["initial"] * 3 and len(results) == 5
    errors = dict(zip(results.trial_id, results.error))
    assert errors[1].startswith("RuntimeError: no good at x=1 (at test_api.py:")
    assert errors[2].startswith("the training function returned without reporting its metrics")
    assert "width" in results.columns and os.path.exists(os.path.join(out, "results.csv"))
    assert json.load(open(os.path.join(out, "best_genotype.json")))["genotype"] == {"x": 3, "kind": "ok"}
    journal = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    assert journal.initial == (SPACE.genotype(seeds[0]), seeds[1], seeds[2])

    again, _ = api.search(train, SPACE, output_dir=out, max_trials=5, population_size=3, sample_size=2,
                          objective="score", initial=seeds, max_consecutive_failures=0)
    assert again.equals(results)  # all done: nothing run again
    with pytest.raises(ValueError, match="holds a different search .*sample_size"):
        api.search(train, SPACE, output_dir=out, max_trials=6, population_size=3, sample_size=3,
                   objective="score", initial=seeds)
