"""Is the input the bottleneck? Training fed by the TFRecord pipeline against in-memory tensors.

The model and step are amoeba's Trainer (resnet18 at 32x32, float32, batch 64, SGD momentum 0.9,
its tf.function train loop of 20 steps per call, driven as `Trainer.train` drives it, without
checkpoints or summaries). Two feeds, each in a fresh child process, alternated tfrecord, memory,
memory, tfrecord, ... (ABBA; use an even --rounds):

  tfrecord: trainer.records.train_dataset over ../shared/data/cifar10-mini prepared into a temp dir
            (fake_imagenet when that is absent): read, shuffle, parse, JPEG decode-and-crop,
            Inception crop, resize, flip, batch, prefetch, all on the same 2 CPUs as the model.
  memory:   the same training images decoded and resized once beforehand (preprocess_for_eval:
            centre crop, resize, [-1, 1]), then from_tensor_slices -> cache -> repeat -> batch ->
            prefetch: no decode and no augmentation per step.

The first call (tracing) is excluded. The ratio judged against the goal is the median of each
round's paired ratio (the two processes run back to back), which one round disturbed by another
process on the CPUs does not move; the pooled ratio and the fastest calls are shown beside it.
Then the pipelines alone, no model, in one more child: images/sec produced by iterating each (the
first batch, which fills the shuffle buffer, excluded), including train_dataset(cache=True), the
Trainer's `cache` option, for comparison.

--cache feeds the tfrecord side with train_dataset(cache=True) (JPEGs decoded once, then crop,
resize and flip per step).

Run: .venv/bin/python benchmarks/input_pipeline.py [--rounds=4 --loops=3 --cache]   (~3 min on 2 CPUs)
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

from trainer_throughput import BATCH, IMAGE_SIZE, LR, MODEL, MOMENTUM, SEED, prepare_data  # same setup

from child import run_child  # benchmarks/child.py: one measurement per fresh process

GOAL = 0.9
RAW_BATCHES = 150  # timed batches per raw-pipeline measurement
RAW_REPEATS = 2


def memory_dataset(data_dir: str, label_offset: int):
    """The training images decoded and resized once, then served from memory."""
    import tensorflow as tf

    from trainer import records

    files = sorted(tf.io.gfile.glob(os.path.join(data_dir, f"{records.TRAIN_PREFIX}-*")))
    features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    images, labels = [], []
    for serialized in tf.data.TFRecordDataset(files):
        example = tf.io.parse_single_example(serialized, features)
        images.append(records.preprocess_for_eval(example["image/encoded"], IMAGE_SIZE))
        labels.append(int(example["image/class/label"]) - label_offset)
    x, y = tf.stack(images), tf.constant(labels, tf.int32)
    return (tf.data.Dataset.from_tensor_slices((x, y)).cache().repeat()
            .batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)), int(x.shape[0])


def run_train(kind: str, data_dir: str, steps: int, loops: int, cache: bool) -> dict:
    import tensorflow as tf

    from trainer.records import train_dataset
    from trainer.train import TrainConfig, Trainer

    model_dir = tempfile.mkdtemp(prefix="ip_model_")
    try:
        config = TrainConfig(
            model=MODEL, data=data_dir, model_dir=model_dir, train_batch_size=BATCH, eval_batch_size=BATCH,
            train_steps=steps * (loops + 1), image_size=IMAGE_SIZE, optimizer="momentum", momentum=MOMENTUM,
            learning_rate=LR, lr_schedule="constant", iterations_per_loop=steps, precision="float32", seed=SEED)
        trainer = Trainer(config)
        if kind == "tfrecord":
            data = train_dataset(data_dir, BATCH, IMAGE_SIZE, label_offset=trainer.label_offset, seed=SEED,
                                 cache=cache)
        else:
            data, _ = memory_dataset(data_dir, trainer.label_offset)
        train_loop, _ = trainer._compile()
        iterator = iter(trainer.strategy.experimental_distribute_dataset(data))
        times = []
        for _ in range(loops + 1):
            t = time.perf_counter()
            train_loop(iterator, tf.constant(steps)).numpy()
            times.append(time.perf_counter() - t)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    return {"first_s": times[0], "loop_s": times[1:]}


def run_raw(data_dir: str) -> dict:
    """Images/sec of each pipeline alone, round-robin RAW_REPEATS times."""
    from trainer.records import read_metadata, train_dataset

    offset = read_metadata(data_dir).label_offset
    makers = {
        "tfrecord": lambda: train_dataset(data_dir, BATCH, IMAGE_SIZE, label_offset=offset, seed=SEED),
        "tfrecord_cache": lambda: train_dataset(data_dir, BATCH, IMAGE_SIZE, label_offset=offset, seed=SEED,
                                                cache=True),
        "memory": lambda: memory_dataset(data_dir, offset)[0],
    }
    out = {name: [] for name in makers}
    for _ in range(RAW_REPEATS):
        for name, make in makers.items():
            iterator = iter(make())
            next(iterator)  # fills the shuffle buffer (and, with cache, decodes every image once)
            t = time.perf_counter()
            for _ in range(RAW_BATCHES):
                next(iterator)
            out[name].append(time.perf_counter() - t)
    return out


def worker(kind: str, data_dir: str, steps: int, loops: int, cache: bool) -> None:
    import tensorflow as tf  # noqa: F401

    if kind == "prepare":
        print(json.dumps({"data": prepare_data(data_dir)}))
    elif kind == "raw":
        print(json.dumps(run_raw(data_dir)))
    else:
        print(json.dumps(run_train(kind, data_dir, steps, loops, cache)))


def child(kind: str, data_dir: str, steps: int, loops: int, cache: bool = False) -> dict:
    return run_child(__file__, [f"--worker={kind}", f"--data_dir={data_dir}", f"--steps={steps}",
                                f"--loops={loops}"] + (["--cache"] if cache else []))


def parse_args() -> argparse.Namespace:
    """The command line: the measurement's size, or one child's part (--worker)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4, help="child processes per feed, alternated")
    parser.add_argument("--loops", type=int, default=3, help="timed calls per child, after the first")
    parser.add_argument("--steps", type=int, default=20, help="steps per call (iterations_per_loop)")
    parser.add_argument("--cache", action="store_true",
                        help="tfrecord side: train_dataset(cache=True), decoded images kept in memory")
    parser.add_argument("--worker", choices=["prepare", "tfrecord", "memory", "raw"])
    parser.add_argument("--data_dir")
    return parser.parse_args()


def measure(args: argparse.Namespace) -> tuple[str, dict[str, list[dict]], dict]:
    """Prepare the data, run the ABBA rounds and the raw pipelines: (data source, rows per feed, raw)."""
    tmp = tempfile.mkdtemp(prefix="input_pipeline_")
    try:
        data_dir = os.path.join(tmp, "data")
        source = child("prepare", data_dir, args.steps, args.loops)["data"]
        rows = {"tfrecord": [], "memory": []}
        for r in range(args.rounds):  # ABBA order
            for kind in (("tfrecord", "memory") if r % 2 == 0 else ("memory", "tfrecord")):
                rows[kind].append(child(kind, data_dir, args.steps, args.loops, args.cache))
                print(f"  round {r + 1} {kind:<8}: {rows[kind][-1]['loop_s']}", file=sys.stderr, flush=True)
        raw = child("raw", data_dir, args.steps, args.loops)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return source, rows, raw


def summarize(rows: dict[str, list[dict]], raw: dict, steps: int) -> dict:
    """The figures: images/sec per feed, the paired and pooled ratios, best loops, spread, raw rates."""
    images = BATCH * steps

    def rate(kind: str) -> float:
        times = [t for row in rows[kind] for t in row["loop_s"]]
        return images * len(times) / sum(times)

    per_round = [(images * len(a["loop_s"]) / sum(a["loop_s"])) / (images * len(b["loop_s"]) / sum(b["loop_s"]))
                 for a, b in zip(rows["tfrecord"], rows["memory"])]
    tfrecord, memory = rate("tfrecord"), rate("memory")
    return {
        "tfrecord": tfrecord, "memory": memory, "pooled": tfrecord / memory, "per_round": per_round,
        "ratio": statistics.median(per_round),
        "best": {kind: images / min(t for row in rows[kind] for t in row["loop_s"]) for kind in rows},
        "spread": max(max(t) / min(t) for t in ([t for row in rows[k] for t in row["loop_s"]] for k in rows)),
        "raw_rate": {name: BATCH * RAW_BATCHES * len(t) / sum(t) for name, t in raw.items()},
    }


def print_table(source: str, fig: dict, args: argparse.Namespace) -> None:
    """The human-readable lines: the training rates and ratios, the pipelines alone, the goal."""
    tfrecord, memory, ratio, best, raw_rate = fig["tfrecord"], fig["memory"], fig["ratio"], fig["best"], fig["raw_rate"]
    print(f"data: {source}; model {MODEL} at {IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH}, {args.steps} steps per "
          f"call, {args.loops} timed calls x {args.rounds} fresh processes per feed, {os.cpu_count()} CPUs")
    print(f"{'training images/sec':<40}{'value':>10}")
    print(f"{'fed by TFRecords (train_dataset' + (', cache' if args.cache else '') + ')':<40}{tfrecord:>10.1f}")
    print(f"{'fed by in-memory tensors':<40}{memory:>10.1f}")
    print(f"{'tfrecord / in-memory, pooled':<40}{fig['pooled']:>10.3f}")
    print(f"{'tfrecord / in-memory, median':<40}{ratio:>10.3f}   per round: "
          + " ".join(f"{x:.3f}" for x in fig["per_round"]))
    print(f"{'best loop: tfrecord, in-memory':<40}{best['tfrecord']:>10.1f}{best['memory']:>10.1f}"
          f"   ratio {best['tfrecord'] / best['memory']:.3f}")
    print(f"slowest/fastest timed loop: {fig['spread']:.2f}"
          + ("  (over 1.25: the CPUs were shared during the run)" if fig["spread"] > 1.25 else ""))
    print(f"{'pipeline alone, images/sec':<40}{'value':>10}{'x training':>12}")
    for name, label in (("tfrecord", "train_dataset"), ("tfrecord_cache", "train_dataset(cache=True)"),
                        ("memory", "in-memory tensors")):
        print(f"{label:<40}{raw_rate[name]:>10.0f}{raw_rate[name] / tfrecord:>12.1f}")
    print(f"goal tfrecord/in-memory >= {GOAL} (median of the rounds' paired ratios): "
          f"{'met' if ratio >= GOAL else 'MISSED'} ({ratio:.3f})")


def result_json(fig: dict, args: argparse.Namespace) -> dict:
    """The final JSON line's record (the README's figures are these)."""
    tfrecord, ratio, best, raw_rate = fig["tfrecord"], fig["ratio"], fig["best"], fig["raw_rate"]
    return {
        "model": MODEL, "image_size": IMAGE_SIZE, "batch_size": BATCH, "steps_per_loop": args.steps,
        "loops": args.loops, "rounds": args.rounds, "cache": args.cache,
        "tfrecord_images_per_s": round(tfrecord, 1), "memory_images_per_s": round(fig["memory"], 1),
        "tfrecord_over_memory_ratio": round(ratio, 3), "pooled_tfrecord_over_memory_ratio": round(fig["pooled"], 3),
        "best_loop_tfrecord_over_memory_ratio": round(best["tfrecord"] / best["memory"], 3),
        "loop_time_spread": round(fig["spread"], 2),
        "raw_pipeline_images_per_s": round(raw_rate["tfrecord"]),
        "raw_pipeline_cache_images_per_s": round(raw_rate["tfrecord_cache"]),
        "raw_memory_images_per_s": round(raw_rate["memory"]),
        "raw_pipeline_over_training_ratio": round(raw_rate["tfrecord"] / tfrecord, 1),
        "goal_met": ratio >= GOAL,
    }


def main() -> None:
    args = parse_args()
    if args.worker:
        worker(args.worker, args.data_dir, args.steps, args.loops, args.cache)
        return
    source, rows, raw = measure(args)
    fig = summarize(rows, raw, args.steps)
    print_table(source, fig, args)
    print(json.dumps(result_json(fig, args)))


if __name__ == "__main__":
    main()
