"""Whether a search's proxy ranks nets as full training does: promote's --audit_k (cells from lower
down the search's ranking, drawn at random beside its top ones) and the report's Kendall tau."""

import os

import pandas as pd
import pytest

from experiments.search.search_config import SearchConfig


def _search(tmp_path, accuracies):
    from experiments.commands.show import load_genotype

    cells = [load_genotype(n).to_json() for n in ("amoebanet_a", "nasnet_a", "amoebanet_d")]
    folder = str(tmp_path / "s")
    os.makedirs(folder)
    config = SearchConfig(output_dir=folder, algorithm="random", max_trials=len(accuracies), initial=tuple(cells))
    search = config.new_algorithm(journal_path=os.path.join(folder, "journal.jsonl"))
    for accuracy in accuracies:
        search.tell(search.ask().trial_id, {"val_accuracy": accuracy})
    search.close()
    return folder


def test_audit_k_adds_lower_ranked_distinct_cells_with_their_ranks(tmp_path):
    from experiments.promote.promote_plan import top_genotypes

    folder = _search(tmp_path, [0.9, 0.8, 0.95, 0.7, 0.6, 0.5, 0.85])  # 3 named cells, then 4 random ones
    top = top_genotypes(folder, 2)
    assert [(m.search_trial_id, m.search_rank) for m in top] == [(2, 1), (0, 2)]  # 0.95, 0.9
    audited = top_genotypes(folder, 2, audit_k=3)
    assert audited[:2] == top
    ranks = [m.search_rank for m in audited[2:]]
    assert len(ranks) == 3 and ranks == sorted(ranks) and min(ranks) >= 3  # from below the top 2
    assert len({repr(m.genotype) for m in audited}) == 5  # distinct cells
    assert top_genotypes(folder, 2, audit_k=3) == audited  # seeded: a rerun plans the same
    assert len(top_genotypes(folder, 2, audit_k=50)) == 7  # as many distinct cells as there are


def _table(ranks, top1, times=None):
    rows = {"name": [f"c{r}" for r in ranks], "kind": "searched", "status": "ok", "search_rank": ranks,
            "search_dir": "runs/s", "top1": top1}
    if times is not None:
        rows["time_to_top1_0.9"] = times
    base = pd.DataFrame({"name": ["resnet9"], "kind": ["baseline"], "status": ["ok"], "top1": [0.9]})
    return pd.concat([pd.DataFrame(rows), base], ignore_index=True)


@pytest.mark.parametrize("top1, tau", [([0.9, 0.8, 0.7, 0.6], "1.00"), ([0.6, 0.7, 0.8, 0.9], "-1.00")])
def test_kendalls_tau_says_whether_the_search_ranked_as_full_training(top1, tau):
    from experiments.promote.comparison import rank_agreement

    [sentence] = rank_agreement(_table([1, 2, 5, 9], top1, times=[100.0, None, 300.0, None]))
    assert "The search of runs/s ranked 4 promoted cells (its ranks 1, 2, 5, 9)" in sentence
    assert f"by top-1: {tau} (p " in sentence
    assert "by time to top-1 0.9: " in sentence  # never reaching it ranks after every hit
    assert rank_agreement(_table([1, 2], [0.9, 0.8])) == []  # too few to say anything


def test_the_report_prints_the_rank_agreement(tmp_path):
    from experiments.promote.comparison import rank_agreement

    table = _table([1, 2, 3], [0.7, 0.9, 0.8])
    assert "by top-1: -0.33" in rank_agreement(table)[0]


def test_the_proxy_audit_benchmark_matches_nets_by_genotype_and_ranks_unreached_targets_last(tmp_path):
    import importlib.util
    import json

    from searchspace.convnet import AIRBENCH94

    spec = importlib.util.spec_from_file_location("audit", os.path.join(os.path.dirname(__file__), "..",
                                                                        "benchmarks", "proxy_rank_agreement.py"))
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    runs = {"airbench94": ({"model": "airbench94"}, [0.8, 0.91]),
            "r9": ({"model": "resnet9", "width_multiplier": 0.5}, [0.86, 0.88]),
            "narrow": ({"model": "convnet", "genotype": {**AIRBENCH94.to_json(), "activation": "relu"}}, [0.87, 0.9])}
    for name, (config, top1s) in runs.items():
        os.makedirs(tmp_path / name)
        (tmp_path / name / "train_config.json").write_text(json.dumps(config))
        (tmp_path / name / "eval_history.jsonl").write_text(
            "".join(json.dumps({"top1": t, "wall_seconds": 100.0 * (i + 1)}) + "\n" for i, t in enumerate(top1s)))
    keys = [audit.network_of(str(tmp_path / name)).key() for name in runs]
    assert "stages=64c0r2.128c0r0.256c0r2" in keys[1]  # ResNet-9's widths halved
    (tmp_path / "narrow" / "train_config.json").write_text(json.dumps({"model": "airbench94_relu"}))
    assert audit.network_of(str(tmp_path / "narrow")).key() == keys[2]  # the family is the same convnet
    pd.DataFrame({"trial_id": [0, 1, 2, 3], "status": ["ok"] * 4, "key": keys + [keys[0]],
                  "seconds_to_target": [300.0, 100.0, 200.0, 50.0]}).to_csv(tmp_path / "results.csv", index=False)
    scores = audit.proxy_scores([str(tmp_path)])
    assert scores[keys[0]] == 300.0  # a repeat's later score is not the net's
    table = pd.DataFrame([{"proxy_seconds": scores[k], **audit.full_training(str(tmp_path / n), [0.85, 0.9])}
                          for k, n in zip(keys, runs)])
    assert table["to_0.9"].tolist() == [200.0, float("inf"), 200.0]
    tau = audit.agreement(table, [0.85, 0.9])
    assert tau["top1"]["tau"] == -1.0  # the proxy's order is full training's top-1 reversed
    assert tau["to_0.85"]["tau"] == pytest.approx(2 / 6 ** 0.5, abs=1e-3)  # 2 concordant pairs, 1 tied: tau-b
