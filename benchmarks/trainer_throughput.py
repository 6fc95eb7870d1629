"""Steady-state training images/sec: amoeba's Trainer against a plain Keras compile + fit.

The same model (resnet18 at 32x32, float32), the same tf.data pipeline (trainer.records.train_dataset
over ../shared/data/cifar10-mini prepared into a temp dir; fake_imagenet when that is absent), batch
64, 20 steps per tf.function call on both sides (iterations_per_loop / steps_per_execution), SGD
momentum 0.9 at a constant lr 0.1, softmax cross-entropy from logits, top-1 and top-5 accuracy,
no XLA. Each measurement is a fresh child process (TensorFlow's default threads, same environment),
alternated trainer, fit, fit, trainer, ... (ABBA; use an even --rounds), so drift on this shared
machine hits both alike.

  trainer: `Trainer(config).train()` itself, as `amoeba train` runs it (summaries; checkpoints
           every 600 s by default, or every N steps with --save_checkpoints_steps) for L+2 loops; only the
           final evaluation is stubbed out. Its tf.function loop and `manager.save` are wrapped
           with timers. The last loop (which always writes the final checkpoint) is not timed.
  fit:     `model.compile(..., steps_per_execution=20)` + `model.fit(ds, epochs=L+1,
           steps_per_epoch=20)`, timed by a callback.

The first call (tracing + graph optimisation) is excluded; L calls per process are timed. "loop"
is the tf.function call alone (train_loop / fit's train_function); "per loop, all in" is from one
call's start to the next's, i.e. with everything each side does between calls (trainer:
summaries and checkpoint; fit: callbacks and epoch logs). Ratios: pooled over all timed calls,
and the median of each round's paired ratio (trainer and fit processes run back to back), which
a round disturbed by another process on the CPUs does not move; "best loop" compares each side's
fastest call. The goal (trainer/fit >= 0.95) is judged on the median "all in" ratio.
--save_checkpoints_steps sets the trainer's TrainConfig field (e.g. 20: a checkpoint after every
loop) to see what the checkpoints cost.

Run: .venv/bin/python benchmarks/trainer_throughput.py [--rounds=4 --loops=3 --save_checkpoints_steps=0]
     (~3 min on 2 CPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from child import run_child  # benchmarks/child.py: one measurement per fresh process

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.environ.get("AMOEBA_SHARED", os.path.join(REPO, "..", "shared"))
CIFAR_MINI = os.path.join(SHARED, "data", "cifar10-mini")
MODEL, IMAGE_SIZE, BATCH, LR, MOMENTUM, SEED = "resnet18", 32, 64, 0.1, 0.9, 0
GOAL = 0.95


def prepare_data(out: str) -> str:
    """Child: cifar10-mini (or a fake ImageNet of the same size) as TFRecords in `out`."""
    if os.path.isdir(CIFAR_MINI):
        from trainer.prepare import PrepareConfig, prepare

        prepare(PrepareConfig(os.path.join(CIFAR_MINI, "train_set.csv"), os.path.join(CIFAR_MINI, "eval_set.csv"),
                              out, labels=os.path.join(CIFAR_MINI, "labels.txt")), verbose=False)
        return "cifar10-mini (1000 train images, 32x32 JPEG, 10 classes)"
    from trainer.fake_imagenet import write_fake_imagenet

    write_fake_imagenet(out, num_train=1000, num_eval=200, num_classes=10, image_size=IMAGE_SIZE)
    return "fake_imagenet (1000 train images, ~32x32 JPEG, 10 classes)"


def run_trainer(data_dir: str, steps: int, loops: int, save_checkpoints_steps: int) -> dict:
    import tensorflow as tf  # noqa: F401

    from trainer.train import TrainConfig, Trainer

    model_dir = tempfile.mkdtemp(prefix="tp_model_")
    try:
        config = TrainConfig(
            model=MODEL, data=data_dir, model_dir=model_dir, train_batch_size=BATCH, eval_batch_size=BATCH,
            train_steps=steps * (loops + 2), image_size=IMAGE_SIZE, optimizer="momentum", momentum=MOMENTUM,
            learning_rate=LR, lr_schedule="constant", iterations_per_loop=steps, precision="float32", seed=SEED,
            save_checkpoints_steps=save_checkpoints_steps)
        trainer = Trainer(config)
        starts, loop_s, saves = [], [], []
        compile_ = trainer._compile

        def timed_compile():
            train_loop, eval_batch = compile_()

            def timed_loop(iterator, n):
                t = time.perf_counter()
                starts.append(t)
                out = train_loop(iterator, n).numpy()
                loop_s.append(time.perf_counter() - t)
                return out

            return timed_loop, eval_batch

        save = trainer.manager.save

        def timed_save(*args, **kwargs):
            t = time.perf_counter()
            path = save(*args, **kwargs)
            saves.append((t, time.perf_counter() - t))
            return path

        def no_eval(eval_batch=None):  # the final evaluation is not training throughput
            return {"step": config.train_steps, "loss": 0.0, "top1": 0.0, "top5": 0.0, "num_examples": 0}

        trainer._compile, trainer.manager.save, trainer.evaluate = timed_compile, timed_save, no_eval
        trainer.train()
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    # timed: calls 2 .. loops+1, each from its start to the next call's start; the first call
    # (tracing) and the last (the final checkpoint, always written) are left out
    timed = starts[1:]
    return {"first_s": loop_s[0], "loop_s": loop_s[1:-1],
            "all_in_s": [b - a for a, b in zip(timed, timed[1:])],
            "save_s": [s for t, s in saves if timed[0] <= t < timed[-1]]}


def run_fit(data_dir: str, steps: int, loops: int) -> dict:
    import keras

    from trainer.models import ModelSpec, build_model
    from trainer.records import read_metadata, train_dataset

    info = read_metadata(data_dir)
    keras.utils.set_random_seed(SEED)
    model = build_model(ModelSpec(MODEL, info.num_classes, IMAGE_SIZE))
    model.compile(keras.optimizers.SGD(LR, momentum=MOMENTUM),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(),
                           keras.metrics.SparseTopKCategoricalAccuracy(k=5)],
                  steps_per_execution=steps, jit_compile=False)
    data = train_dataset(data_dir, BATCH, IMAGE_SIZE, label_offset=info.label_offset, seed=SEED)

    class Timer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.starts, self.loop_s, self.end, self._t = [], [], [], 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self.starts.append(time.perf_counter())

        def on_train_batch_begin(self, batch, logs=None):
            self._t = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.loop_s.append(time.perf_counter() - self._t)

        def on_train_end(self, logs=None):
            self.end.append(time.perf_counter())

    timer = Timer()
    model.fit(data, epochs=loops + 1, steps_per_epoch=steps, verbose=0, callbacks=[timer])
    if len(timer.loop_s) != loops + 1:
        raise RuntimeError(f"expected one train_function call per epoch, got {len(timer.loop_s)}")
    bounds = timer.starts[1:] + timer.end
    return {"first_s": timer.loop_s[0], "loop_s": timer.loop_s[1:],
            "all_in_s": [b - a for a, b in zip(bounds, bounds[1:])], "save_s": []}


def worker(kind: str, data_dir: str, steps: int, loops: int, save_checkpoints_steps: int) -> None:
    t0 = time.perf_counter()
    import tensorflow as tf

    imports = time.perf_counter() - t0
    if kind == "prepare":
        print(json.dumps({"data": prepare_data(data_dir)}))
        return
    if kind == "trainer":
        out = run_trainer(data_dir, steps, loops, save_checkpoints_steps)
    else:
        out = run_fit(data_dir, steps, loops)
    threads = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
               "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    print(json.dumps({"imports_s": imports, "threads": threads, **out}))


def child(kind: str, data_dir: str, steps: int, loops: int, save_checkpoints_steps: int = 0) -> dict:
    return run_child(__file__, [f"--worker={kind}", f"--data_dir={data_dir}", f"--steps={steps}",
                                f"--loops={loops}", f"--save_checkpoints_steps={save_checkpoints_steps}"])


def parse_args() -> argparse.Namespace:
    """The command line: the measurement's size, or one child's part (--worker)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4, help="child processes per side, alternated")
    parser.add_argument("--loops", type=int, default=3, help="timed calls per child, after the first")
    parser.add_argument("--steps", type=int, default=20, help="steps per call (iterations_per_loop)")
    parser.add_argument("--save_checkpoints_steps", type=int, default=0,
                        help="the trainer's TrainConfig.save_checkpoints_steps (0: its default, by time)")
    parser.add_argument("--worker", choices=["prepare", "trainer", "fit"])
    parser.add_argument("--data_dir")
    return parser.parse_args()


def measure(args: argparse.Namespace) -> tuple[str, dict[str, list[dict]]]:
    """Prepare the data and run the ABBA rounds: (data source, rows per side)."""
    tmp = tempfile.mkdtemp(prefix="trainer_throughput_")
    try:
        data_dir = os.path.join(tmp, "data")
        source = child("prepare", data_dir, args.steps, args.loops)["data"]
        rows = {"trainer": [], "fit": []}
        for r in range(args.rounds):  # ABBA order: trainer, fit, fit, trainer, ...
            for kind in (("trainer", "fit") if r % 2 == 0 else ("fit", "trainer")):
                rows[kind].append(child(kind, data_dir, args.steps, args.loops, args.save_checkpoints_steps))
                print(f"  round {r + 1} {kind:<8}: {rows[kind][-1]['all_in_s']}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return source, rows


def _times(rows: dict[str, list[dict]], kind: str, part: str) -> list[float]:
    """All timed calls of one side's `part` (loop_s, all_in_s, save_s), pooled over the rounds."""
    return [t for row in rows[kind] for t in row[part]]


def print_rates(rows: dict[str, list[dict]], images: int) -> dict:
    """The images/sec rows (pooled, per-round median, best loop); returns their figures by part."""
    print(f"{'images/sec':<28}{'trainer':>10}{'keras fit':>11}{'trainer/fit':>13}{'median':>8}   per round")

    def rate(kind: str, part: str) -> float:  # pooled: all timed calls of all rounds
        times = _times(rows, kind, part)
        return images * len(times) / sum(times)

    def round_rates(kind: str, part: str) -> list[float]:
        return [images * len(row[part]) / sum(row[part]) for row in rows[kind]]

    figures = {}
    for part, label in (("loop_s", "loop (tf.function call)"), ("all_in_s", "per loop, all in")):
        t, f = rate("trainer", part), rate("fit", part)
        per_round = [a / b for a, b in zip(round_rates("trainer", part), round_rates("fit", part))]
        median = statistics.median(per_round)
        print(f"{label:<28}{t:>10.1f}{f:>11.1f}{t / f:>13.3f}{median:>8.3f}   "
              + " ".join(f"{x:.3f}" for x in per_round))
        figures[part] = (t, f, t / f, median)
    for part, label in (("loop_s", "best loop"), ("all_in_s", "best loop, all in")):
        # the fastest timed call: what is left without interference
        t, f = images / min(_times(rows, "trainer", part)), images / min(_times(rows, "fit", part))
        print(f"{label:<28}{t:>10.1f}{f:>11.1f}{t / f:>13.3f}")
        figures["best_" + part] = (t, f, t / f)
    return figures


def print_costs(rows: dict[str, list[dict]], args: argparse.Namespace) -> dict:
    """The first call of each side and the trainer's loop split into loop, checkpoint and other."""
    first_t = statistics.mean(r["first_s"] for r in rows["trainer"])
    first_f = statistics.mean(r["first_s"] for r in rows["fit"])
    timed = args.loops * args.rounds
    all_in_t = sum(_times(rows, "trainer", "all_in_s")) / timed
    loop_t = sum(_times(rows, "trainer", "loop_s")) / timed
    save_mean = sum(_times(rows, "trainer", "save_s")) / timed
    print(f"{'first call, s (excluded)':<28}{first_t:>10.2f}{first_f:>11.2f}")
    print(f"trainer, mean s per {args.steps}-step loop: {all_in_t:.3f} all in = {loop_t:.3f} loop + "
          f"{save_mean:.3f} checkpoint save ({save_mean / all_in_t:.1%}) + {all_in_t - loop_t - save_mean:.3f} "
          f"other (summaries, print)")
    return {"first_t": first_t, "first_f": first_f, "checkpoint_share": save_mean / all_in_t}


def print_goal(rows: dict[str, list[dict]], ratio: float) -> float:
    """The loop-time spread (how shared the CPUs were) and the goal's verdict; returns the spread."""

    def spread(kind: str) -> float:
        times = _times(rows, kind, "loop_s")
        return max(times) / min(times)

    slowest = max(spread("trainer"), spread("fit"))
    print(f"slowest/fastest timed loop: trainer {spread('trainer'):.2f}, fit {spread('fit'):.2f}"
          + ("  (over 1.25: the CPUs were shared during the run; the best-loop rows are the steadier figures)"
             if slowest > 1.25 else ""))
    print(f"goal trainer/fit >= {GOAL} (all in, median of the rounds' paired ratios): "
          f"{'met' if ratio >= GOAL else 'MISSED'} ({ratio:.3f})")
    return slowest


def result_json(figures: dict, costs: dict, slowest: float, args: argparse.Namespace) -> dict:
    """The final JSON line's record (the README's figures are these)."""
    ratio = figures["all_in_s"][3]
    return {
        "model": MODEL, "image_size": IMAGE_SIZE, "batch_size": BATCH, "steps_per_loop": args.steps,
        "loops": args.loops, "rounds": args.rounds, "save_checkpoints_steps": args.save_checkpoints_steps,
        "trainer_images_per_s": round(figures["all_in_s"][0], 1), "fit_images_per_s": round(figures["all_in_s"][1], 1),
        "trainer_over_fit_ratio": round(ratio, 3),
        "pooled_trainer_over_fit_ratio": round(figures["all_in_s"][2], 3),
        "trainer_loop_images_per_s": round(figures["loop_s"][0], 1),
        "fit_loop_images_per_s": round(figures["loop_s"][1], 1),
        "loop_trainer_over_fit_ratio": round(figures["loop_s"][3], 3),
        "best_loop_all_in_trainer_over_fit_ratio": round(figures["best_all_in_s"][2], 3),
        "best_loop_trainer_over_fit_ratio": round(figures["best_loop_s"][2], 3),
        "trainer_checkpoint_share": round(costs["checkpoint_share"], 3), "loop_time_spread": round(slowest, 2),
        "first_call_trainer_s": round(costs["first_t"], 2), "first_call_fit_s": round(costs["first_f"], 2),
        "goal_met": ratio >= GOAL,
    }


def main() -> None:
    args = parse_args()
    if args.worker:
        worker(args.worker, args.data_dir, args.steps, args.loops, args.save_checkpoints_steps)
        return
    source, rows = measure(args)
    print(f"data: {source}; model {MODEL} at {IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH}, {args.steps} steps per "
          f"call, {args.loops} timed calls x {args.rounds} fresh processes per side; threads: "
          f"{rows['trainer'][0]['threads']} (0 = TF default, {os.cpu_count()} CPUs); trainer "
          f"save_checkpoints_steps={args.save_checkpoints_steps or '0 (by time: every 600 s)'}")
    figures = print_rates(rows, BATCH * args.steps)  # images per call
    costs = print_costs(rows, args)
    slowest = print_goal(rows, figures["all_in_s"][3])
    print(json.dumps(result_json(figures, costs, slowest, args)))


if __name__ == "__main__":
    main()
