"""Training images/sec of ResNet-50 and AmoebaNet-D on one accelerator, in 16-bit precisions:
amoeba's Trainer against a plain Keras compile + fit, side by side.

Synthetic data (one random batch, repeated: the input pipeline is not measured), 224 px and 1,000
classes by default, SGD with momentum, `--steps` steps per tf.function call on both sides
(iterations_per_loop / steps_per_execution), no XLA. AmoebaNet-D is tensorflow/tpu's N6F256: 6
normal cells in all, so `--num_cells=2` per stack in our vocabulary, `--filters=256`. For each
model and precision (bfloat16, mixed_float16; fit wraps mixed_float16 in Keras's loss scaling, the
Trainer does the same), a fresh process per side; the first call (tracing) is left out and
`--loops` calls are timed.

On a GPU machine: `.venv/bin/python benchmarks/gpu_training.py` (the defaults). It runs tiny on
CPU too (the test does: `--models=resnet20 --image_size=32 --batch=2 --steps=2 --loops=1`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from child import run_child  # benchmarks/child.py: one measurement per fresh process

MODELS = ("resnet50", "amoebanet_d")
PRECISIONS = ("bfloat16", "mixed_float16")


def measure(side: str, model: str, precision: str, args: argparse.Namespace, data_dir: str) -> dict:
    """Child: images/sec of `side` (trainer or fit) training `model` in `precision`."""
    import keras
    import tensorflow as tf

    from trainer.models import ModelSpec, build_model
    from core.proxy_config import PRECISIONS as POLICIES
    from trainer.train import Trainer, TrainConfig

    images = tf.random.uniform((args.batch, args.image_size, args.image_size, 3), -1.0, 1.0, seed=0)
    labels = tf.random.uniform((args.batch,), maxval=args.num_classes, dtype=tf.int32, seed=1)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    if side == "trainer":
        config = TrainConfig(model=model, data=data_dir, model_dir=tempfile.mkdtemp(prefix="gpu_training_"),
                             train_batch_size=args.batch, eval_batch_size=args.batch, train_steps=1_000_000,
                             image_size=args.image_size, num_cells=args.num_cells, filters=args.filters,
                             optimizer="momentum", learning_rate=0.1, lr_schedule="constant",
                             iterations_per_loop=args.steps, precision=precision)
        trainer = Trainer(config)
        train_loop, _ = trainer._compile()
        iterator = iter(trainer.strategy.experimental_distribute_dataset(data))
        times = []
        for _ in range(args.loops + 1):
            t0 = time.perf_counter()
            train_loop(iterator, tf.constant(args.steps))[0].numpy()
            times.append(time.perf_counter() - t0)
    else:
        keras.mixed_precision.set_global_policy(POLICIES[precision])
        net = build_model(ModelSpec(model, args.num_classes, args.image_size, num_cells=args.num_cells,
                                    filters=args.filters))
        net.compile(keras.optimizers.SGD(0.1, momentum=0.9),
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    steps_per_execution=args.steps, jit_compile=False)
        times, started = [], []
        timer = keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: started.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: times.append(time.perf_counter() - started[-1]))
        net.fit(data, epochs=args.loops + 1, steps_per_epoch=args.steps, verbose=0, callbacks=[timer])
    steady = times[1:]
    return {"images_per_sec": args.steps * args.batch * len(steady) / sum(steady), "first_call_s": times[0],
            "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--num_classes", type=int, default=1000)
    parser.add_argument("--num_cells", type=int, default=2, help="AmoebaNet-D's N per stack (tensorflow/tpu's 6)")
    parser.add_argument("--filters", type=int, default=256, help="AmoebaNet-D's F")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--worker", help="side,model,precision (a child)")
    parser.add_argument("--data_dir")
    args = parser.parse_args()
    if args.worker:
        side, model, precision = args.worker.split(",")
        print(json.dumps(measure(side, model, precision, args, args.data_dir)))
        return
    passed = [f"--{k}={v}" for k, v in vars(args).items() if k not in ("worker", "data_dir", "models", "precisions")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        from trainer.fake_imagenet import write_fake_imagenet  # only its metadata is read: the classes

        data_dir = os.path.join(tmp, "labels_only")
        write_fake_imagenet(data_dir, num_train=args.num_classes, num_eval=1, num_classes=args.num_classes,
                            image_size=8)
        for model in args.models.split(","):
            for precision in args.precisions.split(","):
                row = {"model": model, "precision": precision}
                for side in ("trainer", "fit"):
                    out = run_child(__file__, [f"--worker={side},{model},{precision}", f"--data_dir={data_dir}",
                                               *passed])
                    row[f"{side}_images_per_sec"] = round(out["images_per_sec"], 1)
                    row["device"] = out["device"]
                row["trainer_over_fit"] = round(row["trainer_images_per_sec"] / row["fit_images_per_sec"], 3)
                rows.append(row)
    print(f"images/sec, {args.image_size} px, batch {args.batch}, synthetic data, on {rows[0]['device']}")
    print(f"{'model':<14}{'precision':<15}{'trainer':>10}{'fit':>10}{'trainer/fit':>13}")
    for r in rows:
        print(f"{r['model']:<14}{r['precision']:<15}{r['trainer_images_per_sec']:>10.1f}"
              f"{r['fit_images_per_sec']:>10.1f}{r['trainer_over_fit']:>13.3f}")
    print(json.dumps({"image_size": args.image_size, "batch": args.batch, "rows": rows}))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
