"""Where a candidate's first training step goes, and what cuts it.

A new candidate's first step = Python tracing of the tf.function (Keras layer calls, the gradient
tape, the optimizer update) + Grappler's graph optimisation and the first execution. This script
splits the two (`get_concrete_function`, then the first call) for variants of the same step, each
in a fresh process, alternated, on the same sampled cells:
  keras_default:   the step as it was (Keras SGD, its slots created inside the first trace);
  keras_prebuilt:  optimizer.build() before tracing (a step that creates variables is traced twice);
  fused_update:    trainer/fused_optimizer.py's MomentumSGD (one fused op per variable);
  fused_update_bn: and FusedBatchNormalization (one op per batch norm);
  fused_update_bn_nograppler: and Grappler's meta-optimizer off.
The search's training step (trainer/candidate_loop.py) uses the last. Steady steps are timed too,
so a cut that slows training shows.
Run: .venv/bin/python benchmarks/first_step.py [--cells=3 --proxy=digits|cifar]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from child import run_child  # benchmarks/child.py: one measurement per fresh process

VARIANTS = ("keras_default", "keras_prebuilt", "fused_update", "fused_update_bn", "fused_update_bn_nograppler")
PROXIES = {"digits": ((8, 8, 1), 10, 8), "cifar": ((32, 32, 3), 10, 8)}  # input shape, classes, F (N=1)


def worker(variant: str, proxy: str, seed: int) -> None:
    import keras
    import tensorflow as tf

    from searchspace import NasNetSpace
    from trainer.fused_optimizer import MomentumSGD
    from trainer.nasnet import NasNetConfig, build_nasnet
    from trainer.worker_setup import GRAPPLER_OFF, graph_options

    shape, classes, filters = PROXIES[proxy]
    keras.utils.set_random_seed(seed)
    model = build_nasnet(NasNetSpace().sample(random.Random(seed)), shape, classes,
                         NasNetConfig(3, filters, "cifar", fused_batch_norm="_bn" in variant))
    if variant.startswith("fused_update"):
        fused = MomentumSGD(model.trainable_variables, lambda step: 0.01, 0.9)
        update = fused.apply
    else:
        optimizer = keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True)
        if variant != "keras_default":
            optimizer.build(model.trainable_variables)

        def update(grads):
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        update(tape.gradient(loss, model.trainable_variables))
        return loss

    x = tf.random.stateless_normal((64,) + shape, seed=(seed, 0))
    y = tf.random.stateless_uniform((64,), (seed, 1), maxval=classes, dtype=tf.int32)
    with graph_options(GRAPPLER_OFF if variant.endswith("nograppler") else {}):
        t = time.perf_counter()
        step.get_concrete_function(x, y)
        trace = time.perf_counter() - t
        t = time.perf_counter()
        step(x, y).numpy()
        first_call = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(30):
            loss = step(x, y)
        loss.numpy()
        steady = (time.perf_counter() - t) / 30
    print(json.dumps({"trace": trace, "first_call": first_call, "steady_step": steady}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=3)
    parser.add_argument("--proxy", choices=sorted(PROXIES), default="digits")
    parser.add_argument("--worker", choices=VARIANTS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.proxy, args.seed)
        return
    rows: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for seed in range(args.cells):
        order = VARIANTS if seed % 2 == 0 else VARIANTS[::-1]  # alternated, so drift hits all alike
        for variant in order:
            rows[variant].append(run_child(__file__, [f"--worker={variant}", f"--proxy={args.proxy}",
                                                      f"--seed={seed}"]))
    mean = {v: {k: statistics.mean(r[k] for r in rs) for k in ("trace", "first_call", "steady_step")}
            for v, rs in rows.items()}
    base = mean["keras_default"]["trace"] + mean["keras_default"]["first_call"]
    print(f"{args.proxy} proxy (N=1, F={PROXIES[args.proxy][2]}, batch 64), mean of {args.cells} sampled cells")
    print(f"{'variant':<28}{'trace s':>9}{'graph opt + 1st run s':>23}{'first step s':>14}{'vs default':>12}"
          f"{'steady step ms':>16}")
    for v, m in mean.items():
        first = m["trace"] + m["first_call"]
        print(f"{v:<28}{m['trace']:>9.2f}{m['first_call']:>23.2f}{first:>14.2f}{first / base:>12.2f}"
              f"{m['steady_step'] * 1000:>16.1f}")
    chosen_name = VARIANTS[-1]
    chosen = mean[chosen_name]
    figures = {
        "proxy": args.proxy, "cells": args.cells, "chosen": chosen_name,
        **{f"{v}_{k}_s": round(m[k], 3) for v, m in mean.items() for k in ("trace", "first_call", "steady_step")},
        "first_step_chosen_over_default_ratio": round((chosen["trace"] + chosen["first_call"]) / base, 3),
        "steady_step_chosen_over_default_ratio": round(chosen["steady_step"] / mean["keras_default"]["steady_step"], 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
