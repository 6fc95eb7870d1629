"""Your own images end to end: prepare -> train -> SIGKILL and resume -> evaluate -> export -> predict."""

import glob
import json
import math
import os
import signal
import subprocess
import time

import pytest
import tensorflow as tf

from tests.conftest import AMOEBA, REPO, amoeba_here

TRAIN = ["--model=resnet20", "--image_size=32", "--train_batch_size=32", "--eval_batch_size=64",
         "--optimizer=momentum", "--learning_rate=0.05", "--lr_schedule=cosine", "--iterations_per_loop=5"]


def summary_steps(folder, tag):
    steps = []
    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            steps += [event.step for v in event.summary.value if v.tag == tag]
    return sorted(steps)


def summary_tags(folder):
    tags = set()
    for path in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            tags.update(v.tag for v in event.summary.value)
    return tags


@pytest.mark.integration
def test_train_kill_resume_evaluate_export_predict(cifar_mini, tmp_path):
    src, data = cifar_mini
    model_dir, export_dir = str(tmp_path / "model"), str(tmp_path / "export")
    args = ["train", *TRAIN, f"--data={data}", f"--model_dir={model_dir}", "--train_steps=30",
            "--steps_per_eval=15", "--save_checkpoints_steps=5"]
    chatty = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user starts it
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(AMOEBA + args, stdout=subprocess.DEVNULL, stderr=stderr, env=chatty, cwd=REPO)
    index = os.path.join(model_dir, "checkpoints", "checkpoint")
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(index) and "ckpt-5" in open(index).read():
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    said = (tmp_path / "stderr.txt").read_text()  # TensorFlow's C++ start-up lines kept quiet (test_cli: unless asked)
    assert "InitializeLog" not in said and "oneDNN" not in said and "cpu_feature_guard" not in said, said
    saved = tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints"))
    killed_at = int(saved.rsplit("-", 1)[1])
    assert 5 <= killed_at < 30

    result = amoeba_here(*args, f"--export_dir={export_dir}", "--export_format=saved_model,tflite_int8")  # resumed here
    resumed_at = int(result.stdout.split("resuming from ")[1].split(" at step ")[1].split()[0])
    assert resumed_at == killed_at  # nothing lost but the steps after the last checkpoint
    assert "step 30/30" in result.stdout
    evaluation = json.load(open(os.path.join(model_dir, "eval_results.json")))
    assert evaluation["step"] == 30 and evaluation["num_examples"] == 200
    assert evaluation["top5"] >= evaluation["top1"] >= 0
    progress = json.load(open(os.path.join(model_dir, "progress.json")))
    assert progress["phase"] == "training" and progress["step"] == progress["total_steps"] == 30
    assert {"loss", "top1", "top5", "learning_rate", "images_per_sec"} <= summary_tags(os.path.join(model_dir, "train"))
    assert {"loss", "top1", "top5"} <= summary_tags(os.path.join(model_dir, "eval"))
    assert summary_steps(os.path.join(model_dir, "eval"), "top1") == [15, 30]  # every --steps_per_eval
    history = [json.loads(line) for line in open(os.path.join(model_dir, "eval_history.jsonl"))]
    assert [row["step"] for row in history] == [15, 30] and history[-1]["top1"] == evaluation["top1"]
    assert 0 < history[0]["wall_seconds"] < history[1]["wall_seconds"]  # training time, adding up over the resume

    # Evaluate again from the model_dir alone: the same figures.
    again = json.loads(amoeba_here("evaluate", f"--model_dir={model_dir}").stdout.strip().splitlines()[-1])
    assert again["top1"] == pytest.approx(evaluation["top1"]) and again["step"] == 30

    labels = open(os.path.join(src, "labels.txt")).read().split()
    image = os.path.join(src, "test", "frog", "0000.jpg")
    # the CIFAR ResNet-20 baseline, whose shortcuts are a layer of ours, exports and predicts
    out = json.loads(amoeba_here("predict", f"--export_dir={export_dir}", "--format=json", "--top_k=3", image).stdout)
    assert out[0]["image"] == image and len(out[0]["predictions"]) == 3
    # issue 52, 3: the accuracy printed beside an export is the file's, run from the JPEG bytes (one view)
    saved_top1 = float(result.stdout.split("  saved_model  .                  top-1 ")[1].split(";")[0])
    assert saved_top1 == pytest.approx(evaluation["top1"], abs=1e-4)
    assert "  tflite_int8  model_int8.tflite  top-1 0." in result.stdout  # its own top-1, checked against Keras
    # (amoeba predict reads int8 files: test_export_formats)
    assert all(p["label"] in labels for p in out[0]["predictions"])
    assert 0.0 < sum(p["probability"] for p in out[0]["predictions"]) <= 1.0 + 1e-5
    not_an_image = tmp_path / "notes.jpg"
    not_an_image.write_text("not a picture")
    bad = amoeba_here("predict", f"--model={export_dir}", image, str(not_an_image), check=False)
    assert bad.returncode == 1 and f"{not_an_image}: not a decodable image" in bad.stderr
    assert "--model is deprecated; use --export_dir" in bad.stderr  # the old spelling still works


@pytest.mark.integration
def test_a_tiny_overfit_model_predicts_its_training_images(cifar_mini, tmp_path):
    src, _ = cifar_mini
    rows = [line for line in open(os.path.join(src, "train_set.csv")).read().splitlines()
            if line.endswith((",airplane", ",frog"))]
    picked = [r for r in rows if r.endswith(",airplane")][:4] + [r for r in rows if r.endswith(",frog")][:4]
    csv = tmp_path / "train.csv"
    csv.write_text("".join(f"{os.path.join(src, r.split(',')[0])},{r.split(',')[1]}\n" for r in picked))
    data, model_dir, export_dir = str(tmp_path / "d"), str(tmp_path / "m"), str(tmp_path / "e")
    amoeba_here("prepare", f"--train_csv={csv}", f"--eval_csv={csv}", f"--output_dir={data}")
    assert open(os.path.join(data, "labels.txt")).read().split() == ["airplane", "frog"]  # derived, sorted
    trained = amoeba_here("train", "--model=resnet20", "--image_size=32", "--train_batch_size=8", "--eval_batch_size=8",
                     "--optimizer=momentum", "--lr=0.02", "--lr_schedule=constant", "--iterations_per_loop=20",
                     "--train_steps=80", f"--data={data}", f"--model_dir={model_dir}", f"--export_dir={export_dir}")
    assert "--lr is deprecated; use --learning_rate" in trained.stderr  # the old spelling still works
    images = [os.path.join(src, r.split(",")[0]) for r in picked]
    out = json.loads(amoeba_here("predict", f"--export_dir={export_dir}", "--format=json", *images).stdout)
    predicted = [o["predictions"][0]["label"] for o in out]
    assert predicted == [r.split(",")[1] for r in picked]

    # The same model_dir on data with other labels, or with a shifted label offset: refused at once
    # (in this process: `amoeba train` turns the ValueError into exit 1 as for every bad input).
    from trainer.train import Trainer
    from core.train_config import TrainConfig

    _, cifar = cifar_mini
    with pytest.raises(ValueError, match=r"was trained with \['airplane', 'frog'\]"):
        Trainer(TrainConfig(model="resnet20", image_size=32, train_steps=90, data=cifar, model_dir=model_dir)).restore()
    with pytest.raises(ValueError, match="records label_offset 0"):
        Trainer(TrainConfig(model="resnet20", image_size=32, train_steps=90, data=data, model_dir=model_dir,
                            label_offset=1))


@pytest.mark.integration
def test_a_searched_cell_retrains_from_best_genotype_json_with_the_nasnet_recipe_in_bfloat16(tmp_path):
    """The promotion path (a search's best_genotype.json is a model for `amoeba train`) with
    AmoebaNet-D's recipe features together: aux head, drop path, RMSProp with warm-up and
    exponential decay, weight decay, label smoothing, bfloat16; on fake ImageNet. (mixed_float16
    training runs in tests/test_gpu_training_benchmark.py.)"""
    import random

    from searchspace import NasNetSpace

    genotype = NasNetSpace(num_blocks=2).sample(random.Random(3))  # small cells: the same code, half the graph
    best = tmp_path / "best_genotype.json"
    best.write_text(json.dumps({"trial_id": 7, "value": 0.9, "genotype": genotype.to_json()}))
    data, model_dir = str(tmp_path / "fake"), str(tmp_path / "m")
    amoeba_here("prepare", "--fake_imagenet", f"--output_dir={data}", "--num_train=64", "--num_eval=16",
           "--num_classes=3", "--image_size=32")
    result = amoeba_here("train", f"--model={best}", "--num_cells=1", "--filters=8", "--image_size=32",
                         "--train_batch_size=16", "--eval_batch_size=16", "--train_steps=6", "--iterations_per_loop=3",
                         "--optimizer=rmsprop", "--learning_rate=0.05", "--lr_warmup_epochs=0.5",
                         "--lr_decay_value=0.9", "--lr_decay_epochs=1", "--aux_weight=0.4", "--drop_path_keep_prob=0.7",
                         "--weight_decay=4e-5", "--label_smoothing=0.1", "--precision=bfloat16",
                         f"--data={data}", f"--model_dir={model_dir}")
    assert "step 6/6" in result.stdout and "final eval" in result.stdout
    saved = json.load(open(os.path.join(model_dir, "train_config.json")))
    assert saved["model"] == "genotype" and saved["genotype"] == genotype.to_json()
    assert saved["precision"] == "bfloat16" and saved["params"] > 0 and saved["multiply_adds"] > 0
    evaluation = json.load(open(os.path.join(model_dir, "eval_results.json")))
    assert evaluation["num_examples"] == 16 and all(map(math.isfinite, evaluation.values()))
    assert evaluation["step"] == 6
    import keras

    assert keras.mixed_precision.global_policy().name == "float32"  # restored for what the process builds next
    bad = amoeba_here("train", "--model=resnet19", f"--data={data}", f"--model_dir={tmp_path / 'x'}", check=False)
    assert bad.returncode == 1 and "not one of resnet18" in bad.stderr


def test_a_checkpoint_written_before_wall_time_was_kept_still_resumes(tmp_path):
    from trainer.fake_imagenet import write_fake_imagenet
    from trainer.train import Trainer
    from core.train_config import TrainConfig

    data = str(tmp_path / "data")
    write_fake_imagenet(data, num_train=16, num_eval=8, num_classes=2, image_size=16)
    config = TrainConfig(model="resnet20", data=data, model_dir=str(tmp_path / "m"), train_steps=2, image_size=16,
                         train_batch_size=8, eval_batch_size=8, augmentation="cifar")
    old = Trainer(config)
    old.optimizer.iterations.assign(1)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=old.model, optimizer=old.optimizer),
                               str(tmp_path / "m" / "checkpoints"), max_to_keep=1).save(checkpoint_number=1)
    resumed = Trainer(config)
    assert resumed.restore().endswith("ckpt-1") and int(resumed.optimizer.iterations) == 1
    result = resumed.train()
    assert result["step"] == 2 and [row["step"] for row in resumed.evaluations()] == [2]
    assert 0 < resumed.evaluations()[0]["wall_seconds"] == float(resumed.wall_seconds.numpy())
    assert resumed.train()["step"] == 2  # nothing left to train: evaluated again, and not shown as tracing
    assert json.load(open(tmp_path / "m" / "progress.json"))["phase"] == "training"


def test_the_progress_file_says_tracing_then_follows_the_step_inside_one_long_loop(tmp_path, monkeypatch):
    import threading

    from trainer import progress_file

    monkeypatch.setattr(progress_file, "PROGRESS_EVERY_S", 0.04)
    path, step = str(tmp_path / "progress.json"), tf.Variable(0, dtype=tf.int64)

    @tf.function
    def long_loop():  # what a device loop of many steps does to the optimizer's step, unseen by Python
        for _ in tf.range(20):
            step.assign_add(1)
            tf.py_function(lambda: time.sleep(0.03), [], [])

    progress = progress_file.ProgressFile(path, step, 20)
    assert json.load(open(path)) == {"phase": "tracing", "step": 0, "total_steps": 20}
    seen, done = [], threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(json.load(open(path)))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    long_loop()
    done.set()
    watcher.join()
    progress.close()
    inside = [s["step"] for s in seen if s["phase"] == "training"]
    assert any(0 < k < 20 for k in inside), seen[-3:]  # the step moved while the one call ran


def test_label_smoothing_spreads_that_share_of_each_label_over_all_classes():
    from trainer.fast_recipe import per_example_loss

    logits = tf.constant([[2.0, 0.0]])
    log_p = tf.nn.log_softmax(logits)[0].numpy()
    assert float(per_example_loss(tf.constant([0]), logits, 2, 0.0)[0]) == pytest.approx(-log_p[0])
    smoothed = float(per_example_loss(tf.constant([0]), logits, 2, 0.2)[0])
    assert smoothed == pytest.approx(-(0.9 * log_p[0] + 0.1 * log_p[1]))  # 1 - 0.2 + 0.2 / 2, 0.2 / 2


def test_test_time_augmentation_averages_airbenchs_views_logits():
    from trainer.evaluation import tta_logits

    images = tf.reshape(tf.range(16, dtype=tf.float32), [1, 4, 4, 1])  # pixel (r, c) = 4r + c

    def corner_squared(views):  # a "model" whose logit is the square of its top-left pixel
        return views[:, 0, 0, :] ** 2

    assert float(tta_logits(corner_squared, images, "none")[0, 0]) == 0.0
    assert float(tta_logits(corner_squared, images, "flip")[0, 0]) == pytest.approx((0 + 9) / 2)
    # reflect padding by 1, cropped at (0, 0) and at (2, 2): both corners read pixel (1, 1) = 5, flipped (1, 2) = 6;
    # the unshifted pair weighs 1/2, each shifted pair 1/4 (airbench94's infer_mirror_translate)
    expected = 0.5 * (0 + 9) / 2 + 0.25 * (25 + 36) / 2 + 0.25 * (25 + 36) / 2
    assert float(tta_logits(corner_squared, images, "flip_translate")[0, 0]) == pytest.approx(expected)


def test_a_moving_average_of_the_weights_is_evaluated_checkpointed_and_exported(tmp_path):
    import numpy as np

    from trainer.fake_imagenet import write_fake_imagenet
    from trainer.train import Trainer
    from core.train_config import TrainConfig

    data, model_dir = str(tmp_path / "data"), str(tmp_path / "m")
    write_fake_imagenet(data, num_train=16, num_eval=8, num_classes=2, image_size=16)
    config = TrainConfig(model="resnet9", width_multiplier=0.125, data=data, model_dir=model_dir, train_steps=3,
                         image_size=16, train_batch_size=8, eval_batch_size=8, augmentation="cifar",
                         optimizer="momentum", learning_rate=0.5, ema_decay=0.5, iterations_per_loop=3)
    averaging = Trainer(config)
    before = [v.numpy() for v in averaging.model.trainable_variables]
    with averaging.averaged_weights():  # before the first step Keras's averages are zeros: the raw weights stand
        assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, averaging.model.trainable_variables))
    evaluated = averaging.train()
    raw = [v.numpy() for v in averaging.model.trainable_variables]
    with averaging.averaged_weights():
        averaged = [v.numpy() for v in averaging.model.trainable_variables]
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(raw, averaging.model.trainable_variables))  # back
    assert not all(np.allclose(a, b) for a, b in zip(raw, averaged))
    plain = Trainer(TrainConfig(**{**config.__dict__, "ema_decay": 0.0}))
    plain.restore()
    assert plain.evaluate()["loss"] != pytest.approx(evaluated["loss"])  # the raw weights score otherwise
    for variable, value in zip(plain.model.trainable_variables, averaged):
        variable.assign(value)
    assert plain.evaluate()["loss"] == pytest.approx(evaluated["loss"], rel=1e-5)
    resumed = Trainer(config)
    resumed.restore()
    with resumed.averaged_weights():  # the averages are in the checkpoint
        assert all(np.allclose(a, v.numpy()) for a, v in zip(averaged, resumed.model.trainable_variables))
    averaging.export(str(tmp_path / "export"))
    images = tf.random.stateless_uniform([2, 16, 16, 3], seed=[1, 2])
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_float"](images=images)
    assert np.allclose(served["probabilities"].numpy(), tf.nn.softmax(plain.model(images, training=False)).numpy(),
                       atol=1e-5)


def test_bn_momentum_and_epsilon_set_every_batch_norm_layer_or_leave_the_familys_own(tmp_path):
    import keras

    from trainer.fake_imagenet import write_fake_imagenet
    from trainer.train import Trainer
    from core.train_config import TrainConfig

    data = str(tmp_path / "data")
    write_fake_imagenet(data, num_train=8, num_eval=8, num_classes=2, image_size=16)
    config = TrainConfig(model="resnet9", width_multiplier=0.125, data=data, model_dir=str(tmp_path / "m"),
                         train_steps=1, image_size=16, augmentation="cifar")

    def batch_norms(trainer):
        return {(layer.momentum, layer.epsilon) for layer in trainer.model._flatten_layers()
                if isinstance(layer, keras.layers.BatchNormalization)}

    assert batch_norms(Trainer(config)) == {(0.9, 1e-5)}  # resnet9's own
    assert batch_norms(Trainer(TrainConfig(**{**config.__dict__, "bn_momentum": 0.6, "bn_epsilon": 1e-12}))) == {
        (0.6, 1e-12)}  # airbench94's, in Keras's convention
    from trainer.batch_norm import set_batch_norm

    inputs = keras.Input((2,))
    norm = keras.layers.BatchNormalization()
    model = keras.Model(inputs, norm(inputs))
    assert set_batch_norm(model, 0.6) == 1
    model(tf.constant([[1.0, 2.0], [3.0, 4.0]]), training=True)  # batch mean (2, 3), the moving mean from 0
    assert norm.moving_mean.numpy() == pytest.approx([0.4 * 2, 0.4 * 3])  # 0.6 x 0 + (1 - 0.6) x mean


def test_a_tie_of_logits_counts_for_the_first_class_only_as_an_export_serves_it():
    """Found with a near-constant inherited net: tf.math.in_top_k counted a tie right for every tied
    class, so the trainer's top-1 (0.105) was above its exported files' (0.09) on the same images."""
    import tensorflow as tf

    from trainer.evaluation import per_image_correct, top1_right

    logits = tf.constant([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.1, 0.5, 0.2]])
    labels = tf.constant([1, 0, 1])
    assert top1_right(labels, logits).numpy().tolist() == [False, True, True]
    weights = tf.constant([1.0, 1.0, 0.0])
    assert per_image_correct(labels, logits, weights).numpy().tolist() == [0, 1, -1]
