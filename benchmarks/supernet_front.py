"""Whether a supernet search's nets win where a deploying user looks (issue 54's CIFAR-10 goal): for an
`amoeba promote` of a supernet search beside baselines (each trained alone, the same data, recipe
and images), each model's top-1 on the evaluation split (the promote's comparison.csv) and its
TFLite batch-1 latency, measured here side by side (each model's network rebuilt from its model dir
and converted, then `--rounds` rounds of every model in turn, the median of each model's rounds);
then, for each baseline, the searched models at equal or lower latency, the most accurate of them on
the validation split (promote's val_top1: never chosen on the test split), and McNemar's paired test
on the same images (experiments/promote/noise.py); and the same for the fine-tuned rows (promote
--finetune_epochs), chosen by the search's own score of the net (its inherited accuracy on the
search's validation split, which the supernet did not train on). A baseline is
dominated when such a model is at least as accurate; beaten when it is more accurate beyond noise
(p < 0.05). The searched models are those trained from scratch: a supernet search's inherited and
fine-tuned rows (promote --finetune_epochs) are shown beside them, with the same-net sentences the
report prints; their promote validation images may be ones the supernet trained on, so they are
chosen by the search's score instead.
Prints a table and one JSON line; writes nothing.

Run: .venv/bin/python benchmarks/supernet_front.py --promote_dir=DIR [--rounds=3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def latencies(model_dirs: dict[str, str], rounds: int) -> dict[str, float]:
    """Each model's TFLite batch-1 latency (ms): the median over `rounds` rounds of every model in turn."""
    import tensorflow as tf

    from trainer.candidate_network import _median_call_ms
    from trainer.export_formats import tflite_interpreter
    from trainer.train import load_trainer

    calls = {}
    for name, model_dir in model_dirs.items():
        model = load_trainer(model_dir).model
        size = int(model.input_shape[1])
        interpreter = tflite_interpreter(model, size, int(model.input_shape[-1]))
        interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [1, size, size, 3])
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                               tf.random.uniform([1, size, size, 3], -1, 1).numpy())
        calls[name] = interpreter.invoke
    measured: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            measured[name].append(_median_call_ms(call))
    return {name: statistics.median(values) for name, values in measured.items()}


def against_baselines(table, candidates, choose_by: str) -> list[dict]:
    """For each baseline of `table`, the candidate at equal or lower TFLite latency chosen by
    `choose_by` (a validation score, never the test split's), judged on the test split against it
    by McNemar's paired test."""
    from core.correct_images import decoded
    from experiments.promote import noise

    verdicts = []
    for name, base in table[table.kind == "baseline"].iterrows():
        faster = candidates[candidates.tflite_ms <= base.tflite_ms]
        if faster.empty:
            verdicts.append({"baseline": name, "dominated": False, "by": None})
            continue
        best = faster.sort_values([choose_by, "tflite_ms"], ascending=[False, True]).iloc[0]
        p, only_a, only_b = noise.paired(decoded(best.eval_correct), decoded(base.eval_correct))
        verdicts.append({"baseline": name, "baseline_top1": base.top1, "baseline_ms": round(base.tflite_ms, 3),
                         "by": best.name, "top1": best.top1, "ms": round(best.tflite_ms, 3),
                         "dominated": bool(best.top1 >= base.top1), "beaten": bool(best.top1 > base.top1 and p < 0.05),
                         "p_value": round(p, 4), "images_only_searched": only_a, "images_only_baseline": only_b})
    return verdicts


def same_net_agreement(table) -> dict:
    """Over the searched nets with an inherited row (and a fine-tuned one): Kendall's tau between the
    inherited (fine-tuned) and the from-scratch test top-1, and the mean gap from scratch minus each."""
    from scipy.stats import kendalltau

    out: dict = {"nets": 0}
    for kind in ("inherited", "fine-tuned"):
        pairs = [(table.loc[f"{name}-{kind}", "top1"], row.top1) for name, row in table[table.kind == "searched"].iterrows()
                 if f"{name}-{kind}" in table.index]
        if len(pairs) >= 2:
            tau, p = kendalltau([a for a, _ in pairs], [b for _, b in pairs])
            out.update({"nets": len(pairs), f"{kind}_tau": round(float(tau), 3), f"{kind}_p": round(float(p), 4),
                        f"scratch_minus_{kind}": round(sum(b - a for a, b in pairs) / len(pairs), 4)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--promote_dir", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import glob

    from experiments.promote.comparison import same_net_sentences
    from experiments.promote.driver import read_comparison

    table = read_comparison(args.promote_dir)
    dirs = {os.path.basename(os.path.dirname(path)): os.path.dirname(path)
            for path in glob.glob(os.path.join(args.promote_dir, "**", "train_config.json"), recursive=True)}
    table = table[(table.status == "ok") & table.name.isin(dirs)].set_index("name")
    latency = latencies({name: dirs[name] for name in table.index}, args.rounds)
    table["tflite_ms"] = [latency[name] for name in table.index]
    verdicts = against_baselines(table, table[table.kind == "searched"], "val_top1")
    tuned = against_baselines(table, table[table.kind == "fine-tuned"], "search_val_accuracy")
    print(table[["kind", "params", "top1", "epochs", "wall_seconds", "tflite_ms"]].sort_values("tflite_ms").to_string())
    for v in verdicts:
        print(v)
    print("fine-tuned, chosen by the search's own score:")
    for v in tuned:
        print(v)
    for sentence in same_net_sentences(read_comparison(args.promote_dir)):
        print(sentence)
    fidelity = same_net_agreement(table)
    print(f"inherited against from scratch over {fidelity['nets']} nets: {fidelity}")
    print(json.dumps({"models": len(table), "baselines": len(verdicts),
                      "dominated": sum(v["dominated"] for v in verdicts),
                      "beaten_beyond_noise": sum(v.get("beaten", False) for v in verdicts),
                      "fine_tuned_dominated": sum(v["dominated"] for v in tuned),
                      "fine_tuned_beaten_beyond_noise": sum(v.get("beaten", False) for v in tuned),
                      "inherited_vs_scratch": fidelity, "verdicts": verdicts, "fine_tuned_verdicts": tuned}))


if __name__ == "__main__":
    main()
