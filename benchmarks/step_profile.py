"""Where a small cell network's training step goes on this CPU, and what TensorFlow's own options
change of it without changing the network (issue 21, part 2).

The step is the search's own: trainer/candidate_loop.py's traced step (the fused momentum update, no
Keras fit), on random 32x32 images held in memory. Models at the timed search's size (N=1, F=8,
batch 64): a pooling cell network (the guide's 250 images/s figure, at batch 128 there), NASNet-A,
and, for contrast, ResNet-9 at a quarter width. Two measurements, each in fresh child processes:

- The profile: TensorFlow's profiler traces `--profile_steps` steps of each model as the search runs
  it; its framework op statistics give each op's self time, summed by TensorFlow op type and by the
  role of the layer it belongs to (input projection, separable conv, plain conv, pooling, block add,
  concatenation, factorized reduction, stem, head, optimizer update), with the op count per step.
- The options: images/s with each variant of the process's settings (VARIANTS: Grappler's passes,
  oneDNN, the inter-op pool), in `--rounds` rounds whose order alternates (ABBA), the ratio to
  "as_is" the median over rounds, with the first step's seconds (the trace and Grappler) and the
  loss after the timed steps from the same weights. None changes the network or its arithmetic
  beyond floating-point order.

Run: .venv/bin/python benchmarks/step_profile.py [--rounds=2 --steps=40 --profile_steps=10]  (~10 min on 2 CPUs)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("nasnet_pool_n1_f8", "nasnet_a_n1_f8", "resnet9@0.25")
BATCH = 64
GRAPPLER_PASSES = ("layout_optimizer", "constant_folding", "shape_optimization", "remapping",
                   "arithmetic_optimization", "dependency_optimization", "loop_optimization",
                   "function_optimization", "debug_stripper", "scoped_allocator_optimization",
                   "pin_to_host_optimization", "implementation_selector")
# What each variant sets in the child process; "as_is" is how a search's worker runs a candidate.
VARIANTS = {
    "as_is": {},  # oneDNN (TensorFlow's default on this CPU), Grappler off for the trace, default thread pools
    "grappler_on": {"grappler": {}},  # Grappler's default passes (the remapper fuses conv + BN + ReLU)
    "remapper_only": {"grappler": {**{p: False for p in GRAPPLER_PASSES}, "remapping": True}},
    "grappler_but_remapper": {"grappler": {"remapping": False}},
    "onednn_off": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
    "inter_op_1": {"inter_op": 1},  # one op at a time: no parallel branches, both cores inside each op
}
PROFILED = ("as_is", "grappler_on")
ROLES = (  # (role, pattern on the op's name, its layer's and its gradient's); the first match wins
    ("factorized reduction", r"_h1_(path|pad|shift|concat|final)|_out\d+_"),
    ("input projection", r"_h[01]_(relu|conv|bn)"),
    ("identity's 1x1 conv", r"_b\d[lr]_none_"),  # where the state's stride or width differs
    ("separable conv", r"_sep"),
    ("pooling", r"_pool_\dx\d|_subsample"),
    ("plain conv", r"_b\d[lr]_(plain_)?conv_"),
    ("block add", r"_b\d_add"),
    ("concatenation", r"_out(_\d+)?/"),
    ("gradient sums", r"^AddN"),
    ("fixed reduction", r"reduction\d_"),
    ("stem", r"stem"),
    ("head", r"final|logits|loss|sparse_categorical"),
    ("optimizer update", r"ResourceApplyKerasMomentum|AssignAdd|Momentum"),
)


def spec(name: str):
    from searchspace import Block, NasNetGenotype, make_cell
    from searchspace.references import NASNET_A
    from trainer.models import ModelSpec

    if name == "resnet9@0.25":
        return ModelSpec("resnet9", 10, 32, width_multiplier=0.25)
    if name == "nasnet_a_n1_f8":
        genotype = NASNET_A
    else:
        pool = make_cell([Block((0, 1), ("max_pool_3x3", "avg_pool_3x3"))] +
                         [Block((i % 2, 2), ("none", "max_pool_3x3")) for i in range(4)])
        genotype = NasNetGenotype(pool, pool)
    return ModelSpec("genotype", 10, 32, num_cells=1, filters=8, stem="cifar", fused_batch_norm=True,
                     genotype=genotype)


def child(name: str, variant: str, steps: int, profile_dir: str) -> dict:
    import time

    import numpy as np
    import tensorflow as tf

    from trainer.candidate_step import train_step_function
    from trainer.fused_optimizer import MomentumSGD, RestartingCosine
    from trainer.models import build_model, model_report
    from trainer.worker_setup import GRAPPLER_OFF, graph_options

    import keras

    settings = VARIANTS[variant]
    if "inter_op" in settings:
        tf.config.threading.set_inter_op_parallelism_threads(settings["inter_op"])
    keras.utils.set_random_seed(0)  # the same weights in every variant: their losses compare
    model = build_model(spec(name))
    optimizer = MomentumSGD(model.trainable_variables, RestartingCosine(0.05, 10**6), 0.9)
    step = train_step_function(model, optimizer, "float32")
    rng = np.random.default_rng(0)
    x = tf.constant(rng.uniform(-1, 1, (BATCH, 32, 32, 3)).astype("float32"))
    y = tf.constant(rng.integers(0, 10, BATCH).astype("int32"))
    with graph_options(settings["grappler"] if "grappler" in settings else GRAPPLER_OFF):
        start = time.perf_counter()
        float(step(x, y))
        trace_seconds = time.perf_counter() - start
        for _ in range(2):  # warm steps
            float(step(x, y))
    if profile_dir:
        tf.profiler.experimental.start(profile_dir)
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(x, y)
    float(loss)
    seconds = time.perf_counter() - start
    if profile_dir:
        tf.profiler.experimental.stop()
    return {"model": name, "variant": variant, **model_report(model), "trace_seconds": round(trace_seconds, 2),
            "images_per_sec": round(BATCH * steps / seconds, 1), "step_ms": round(1000 * seconds / steps, 2),
            "loss": round(float(loss), 4)}


def op_stats(profile_dir: str, steps: int) -> dict:
    """Self time per step (ms) by TensorFlow op type and by layer role, and ops per step."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin

    path = glob.glob(os.path.join(profile_dir, "**", "*.xplane.pb"), recursive=True)[-1]
    table = json.loads(plugin.xspace_to_tools_data([path], "framework_op_stats", {})[0])[0]
    cols = [c["id"] for c in table["cols"]]
    by_type: dict[str, float] = {}
    by_role: dict[str, float] = {}
    ops = 0
    for row in table["rows"]:
        r = dict(zip(cols, (c.get("v") for c in row["c"])))
        if r["host_or_device"] != "Host" or r["type"] in ("IDLE", "_Retval", "_Arg"):
            continue
        ms = r["total_self_time"] / 1000 / steps
        ops += r["occurrences"]
        by_type[r["type"]] = by_type.get(r["type"], 0.0) + ms
        role = next((role for role, pattern in ROLES if re.search(pattern, r["operation"])), "other")
        by_role[role] = by_role.get(role, 0.0) + ms
    ordered = lambda d: {k: round(v, 2) for k, v in sorted(d.items(), key=lambda kv: -kv[1])}
    return {"ops_per_step": round(ops / steps), "self_ms_per_step": round(sum(by_type.values()), 2),
            "by_role": ordered(by_role), "by_type": ordered(by_type)}


def measure(name: str, variant: str, steps: int, profile_dir: str = "") -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT, **VARIANTS[variant].get("env", {})}
    command = [sys.executable, __file__, "--child", name, f"--variant={variant}", f"--steps={steps}",
               f"--profile_dir={profile_dir}"]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def profile(name: str, variant: str, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        timed = measure(name, variant, steps, tmp)
        stats = op_stats(tmp, steps)
    print(f"\n{name}, {variant}: {timed['params']:,} params, {timed['multiply_adds'] / 1e6:.1f}M MACs, "
          f"{timed['step_ms']} ms a step traced ({stats['ops_per_step']} ops, {stats['self_ms_per_step']} ms "
          f"of op self time)", flush=True)
    for key in ("by_role", "by_type"):
        top = list(stats[key].items())[:12]
        print(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in top), flush=True)
    return {**timed, **stats}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--profile_steps", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--child")
    parser.add_argument("--variant", default="as_is")
    parser.add_argument("--profile_dir", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.variant, args.steps, args.profile_dir)))
        return
    models = args.models.split(",")
    profiles = {f"{name} {variant}": profile(name, variant, args.profile_steps)
                for name in models for variant in PROFILED}
    options = {}
    for name in models:
        runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for r in range(args.rounds):
            for variant in (list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))):
                runs[variant].append(measure(name, variant, args.steps))
        base = [m["images_per_sec"] for m in runs["as_is"]]
        options[name] = {v: {"images_per_sec": statistics.median(m["images_per_sec"] for m in got),
                             "over_as_is": round(statistics.median(m["images_per_sec"] / b
                                                                   for m, b in zip(got, base)), 3),
                             "trace_seconds": statistics.median(m["trace_seconds"] for m in got),
                             "loss_after_steps": got[0]["loss"]}
                         for v, got in runs.items()}
        print(f"{name:20} " + "  ".join(f"{v} {o['images_per_sec']:.0f} ({o['over_as_is']:.2f}x, trace "
                                        f"{o['trace_seconds']:.1f} s, loss {o['loss_after_steps']})"
                                        for v, o in options[name].items()), flush=True)
    print(json.dumps({"benchmark": "step_profile", "batch": BATCH, "steps": args.steps, "rounds": args.rounds,
                      "profiles": profiles, "options": options}))


if __name__ == "__main__":
    main()
