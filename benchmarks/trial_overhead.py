"""Where a search trial's wall time goes, for the default proxy (digits, N=1, F=8, 4 epochs).

Each trial runs in a fresh Python process, as in a search. The table splits its wall time into
process start + imports, data + model build, the first step (tracing and graph optimisation),
the remaining training steps, and evaluation. Side by side, the same candidates through a plain
Keras `model.fit`, to show what the trainer's own tf.function step saves in fixed cost.
Run: .venv/bin/python benchmarks/trial_overhead.py [--trials=3]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from child import run_child  # benchmarks/child.py: one measurement per fresh process



def worker(kind: str, seed: int) -> None:
    """Runs in the child process: one candidate, timings as JSON on the last line."""
    t0 = time.perf_counter()
    import keras

    from searchspace import NasNetSpace
    from trainer.candidate import train_candidate
    from trainer.data import load_builtin, train_pipeline
    from trainer.nasnet import NasNetConfig, build_nasnet
    from trainer.proxy import ProxyConfig

    imports = time.perf_counter() - t0
    genotype = NasNetSpace().sample(random.Random(seed))
    proxy = ProxyConfig()
    if kind == "trainer":
        m = train_candidate(genotype, proxy)
        out = {"setup": m["setup_seconds"], "first_step": m["first_step_seconds"],
               "steps": m["train_seconds"] - m["first_step_seconds"], "eval": m["eval_seconds"]}
    else:  # plain Keras fit with the same model, data and optimizer settings
        t = time.perf_counter()
        data = load_builtin(proxy.dataset)
        keras.utils.set_random_seed(proxy.seed)
        model = build_nasnet(genotype, data.input_shape, data.num_classes,
                             NasNetConfig(3 * proxy.num_cells, proxy.filters, "cifar"))
        model.compile(keras.optimizers.SGD(proxy.learning_rate, momentum=proxy.momentum, nesterov=True),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                      jit_compile=False)
        ds = train_pipeline(data.x_train, data.y_train, proxy.batch_size, proxy.seed)
        setup = time.perf_counter() - t
        t = time.perf_counter()
        model.fit(ds.take(1), epochs=1, verbose=0)
        first = time.perf_counter() - t
        t = time.perf_counter()
        model.fit(ds, epochs=proxy.epochs, verbose=0)
        # fit's epochs above include one step more than the trainer's; per-step time is what counts
        steps = time.perf_counter() - t
        t = time.perf_counter()
        model.evaluate(data.x_val, data.y_val, batch_size=proxy.batch_size, verbose=0)
        out = {"setup": setup, "first_step": first, "steps": steps, "eval": time.perf_counter() - t}
    print(json.dumps({"imports": imports, **out}))


def child(kind: str, seed: int) -> dict[str, float]:
    t0 = time.perf_counter()
    timings = run_child(__file__, [f"--worker={kind}", f"--seed={seed}"])
    wall = time.perf_counter() - t0
    accounted = sum(timings.values())
    return {"wall": wall, "process_start": wall - accounted, **timings}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--worker", choices=["trainer", "fit"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.seed)
        return
    rows = {"trainer": [], "fit": []}
    for seed in range(args.trials):
        for kind in ("trainer", "fit"):  # alternated, so drift hits both alike
            rows[kind].append(child(kind, seed))
    parts = ["process_start", "imports", "setup", "first_step", "steps", "eval"]
    mean = {k: {p: sum(r[p] for r in v) / len(v) for p in parts + ["wall"]} for k, v in rows.items()}
    print(f"{'part':<15}{'trainer s':>11}{'share':>8}{'keras fit s':>13}{'share':>8}")
    for p in parts + ["wall"]:
        t, f = mean["trainer"][p], mean["fit"][p]
        print(f"{p:<15}{t:>11.2f}{t / mean['trainer']['wall']:>8.0%}{f:>13.2f}{f / mean['fit']['wall']:>8.0%}")
    overhead = 1 - mean["trainer"]["steps"] / mean["trainer"]["wall"]
    figures = {
        "trials": args.trials,
        "trainer_wall_s": round(mean["trainer"]["wall"], 2),
        "trainer_non_training_share": round(overhead, 3),
        "trainer_first_step_s": round(mean["trainer"]["first_step"], 2),
        "fit_first_step_s": round(mean["fit"]["first_step"], 2),
        "first_step_trainer_over_fit_ratio": round(mean["trainer"]["first_step"] / mean["fit"]["first_step"], 2),
        "wall_trainer_over_fit_ratio": round(mean["trainer"]["wall"] / mean["fit"]["wall"], 2),
    }
    print(f"share of a trial's wall time that is not training steps: {overhead:.0%}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
