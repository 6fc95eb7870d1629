"""`amoeba inherit` (experiments/commands/inherit.py, trainer/subnet_model_dir.py): a supernet search's
subnet as an `amoeba train` model dir with its inherited weights, on a tiny supernet search of the
prepared cifar10-mini JPEGs at 16 pixels (its supernet trained one epoch of 128 images, its trials
told made-up scores)."""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest

from core.proxy_config import ProxyConfig
from searchspace.convnet import ConvNetGenotype, Stage
from tests.conftest import amoeba_here, made_once

SEED = ConvNetGenotype("whiten2x2", 0, "relu", (Stage(24, 1), Stage(32, 0)), "conv_pool_bn", head_divisor=9)


@pytest.fixture(scope="session")
def search(cifar_mini, tmp_path_factory):
    """A finished supernet search: trial 0 the seed, 1 the best, 2 failed; its trained supernet. Made
    once a run for every pytest-xdist worker (the integration test below runs first, apart from the
    others), and only read by the tests."""
    from evolution import resume

    proxy = ProxyConfig(dataset="prepared", data=cifar_mini[1], image_size=16, validation_images=64,
                        train_images=128, epochs=1, train_batch_size=32, learning_rate=0.05, label_smoothing=0.2,
                        lookahead_every=2, bn_lr_factor=4.0, whiten_bias_epochs=1, weight_decay=1e-3)
    out = made_once(tmp_path_factory, "supernet_search", lambda out: _make_search(out, proxy))
    algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    return out, algorithm.space, proxy, [algorithm.trials[i].genotype for i in range(3)]


def _make_search(out: str, proxy: ProxyConfig) -> None:
    from experiments.search.output_dir import open_search
    from experiments.search.search_config import SearchConfig
    from experiments.search.supernet import supernet_dir
    from trainer.proxy_data import load_proxy_data
    from trainer.supernet_training import train_supernet

    config = SearchConfig(output_dir=out, proxy_space="convnet", evaluator="supernet", initial=(SEED.to_json(),),
                          proxy=proxy, max_trials=3, population_size=3, sample_size=2)
    algorithm = open_search(config)
    trials = [algorithm.ask() for _ in range(3)]
    train_supernet(algorithm.space, proxy, load_proxy_data(proxy), supernet_dir(out), sandwich=2)  # a smaller trace
    algorithm.tell(trials[0].trial_id, {"val_accuracy": 0.3, "validation_images": 64})
    algorithm.tell(trials[1].trial_id, {"val_accuracy": 0.6, "validation_images": 64})
    algorithm.tell(trials[2].trial_id, error="out of memory")
    algorithm.close()


def test_the_best_subnet_leaves_with_its_inherited_weights_for_evaluate_and_a_fine_tuning_train(search, tmp_path):
    from experiments.search.supernet import supernet_dir
    from trainer.proxy_data import load_proxy_data
    from trainer.subnet_score import SubnetScorer
    from trainer.train import load_trainer

    out, space, proxy, genotypes = search
    model_dir = str(tmp_path / "subnet")
    result = amoeba_here("inherit", f"--search_dir={out}", f"--model_dir={model_dir}", "--epochs=0.1")
    assert f"wrote {model_dir}: trial 1 of {out} ({genotypes[1].key()}" in result.stdout
    assert "val_accuracy 0.6000 inherited" in result.stdout and f"--flagfile={model_dir}/train.cfg" in result.stdout
    inherited = json.load(open(os.path.join(model_dir, "inherited.json")))
    assert inherited["trial_id"] == 1 and inherited["key"] == genotypes[1].key() and inherited["recal_images"] == 128

    trainer = load_trainer(model_dir)  # as amoeba evaluate loads it
    config = trainer.config
    assert (config.model, config.genotype, config.image_size, config.num_epochs) == ("convnet", genotypes[1], 16, 0.1)
    assert config.validation_images == 200 and config.train_batch_size == 64  # promote's for 1,000 images
    assert int(trainer.optimizer.iterations) == 0
    scorer = SubnetScorer(space, proxy, load_proxy_data(proxy), supernet_dir(out))
    subnet = scorer.subnet(genotypes[1])
    images = scorer.recal_images[0][:32]
    np.testing.assert_allclose(trainer.model(images, training=False).numpy(), subnet(images, training=False).numpy(),
                               rtol=1e-4, atol=1e-5)
    assert not np.allclose(trainer.model.get_layer("stage1_bn").moving_variance.numpy(), 1.0)  # recalibrated
    average = trainer.lookahead.average[0].numpy()  # the lookahead starts from the inherited weights too
    np.testing.assert_array_equal(average, trainer.lookahead.weights[0].numpy())

    with pytest.raises(ValueError, match="already holds a checkpoint"):
        _write(out, None, model_dir)
    tuned = amoeba_here("train", f"--flagfile={model_dir}/train.cfg")
    assert "resuming from" in tuned.stdout and "at step 0" in tuned.stdout and "final eval: top1" in tuned.stdout
    assert load_trainer(model_dir).config == config  # the flagfile's recipe is the one written


def test_a_trial_that_did_not_end_ok_or_a_search_without_a_supernet_is_refused(search, tmp_path):
    out, *_ = search
    with pytest.raises(ValueError, match="trial 2 ended failed \\(out of memory\\)"):
        _write(out, 2, str(tmp_path / "failed"))
    with pytest.raises(ValueError, match="no trial 7"):
        _write(out, 7, str(tmp_path / "unknown"))
    trained = tmp_path / "trained_search"
    trained.mkdir()
    shutil.copy(os.path.join(out, "journal.jsonl"), trained)
    settings = json.load(open(os.path.join(out, "search_config.json")))
    (trained / "search_config.json").write_text(json.dumps({**settings, "evaluator": "train"}))
    with pytest.raises(ValueError, match=f"{trained}: not a supernet search"):
        _write(str(trained), 0, str(tmp_path / "other"))
    result = amoeba_here("inherit", f"--search_dir={tmp_path}", f"--model_dir={tmp_path / 'm'}", check=False)
    assert result.returncode == 1 and "give the output dir of an `amoeba search --evaluator=supernet`" in result.stderr
    assert not os.path.exists(tmp_path / "failed") and not os.path.exists(tmp_path / "m")


@pytest.mark.integration  # writes, evaluates and trains three models: the promote path of a supernet search
def test_promote_shows_the_same_net_inherited_fine_tuned_and_from_scratch(search, tmp_path):
    """Issue 54, item 3: a supernet search's promoted net in three rows: its inherited weights
    evaluated as they are, fine-tuned --finetune_epochs from them, and trained from scratch."""
    from experiments.promote.comparison import same_net_sentences
    from experiments.promote.driver import PromoteConfig, comparison_table, train_planned, trial_spec
    from experiments.promote.promote_plan import model_config, open_plan
    from trainer.train import load_trainer

    out, _, proxy, genotypes = search
    recipe = {"image_size": 16, "num_epochs": 0.2, "train_batch_size": 64, "eval_batch_size": 100,
              "whiten_bias_epochs": 0.1, "validation_images": 100, "learning_rate": 0.05, "optimizer": "momentum"}
    config = PromoteConfig(output_dir=str(tmp_path / "p"), data=proxy.data, recipe=recipe, search_dirs=(out,),
                           top_k=1, finetune_epochs=0.1, target_top1=(0.01,))
    planned = open_plan(config)
    name = f"{os.path.basename(out)}-trial1"
    assert [(m.name, m.kind) for m in planned] == [(name, "searched"), (f"{name}-inherited", "inherited"),
                                                   (f"{name}-fine-tuned", "fine-tuned")]
    assert {m.genotype["stages"][0]["width"] for m in planned} == {genotypes[1].stages[0].width}
    tuned = model_config(config, planned[2])
    assert (tuned.num_epochs, tuned.whiten_bias_epochs) == (0.1, 0.05)  # the recipe at 0.1 of its 0.2 epochs
    results = {m.name: train_planned(trial_spec(config, m), threads=2) for m in planned}

    inherited = results[f"{name}-inherited"]
    assert (inherited["steps"], inherited["epochs"], inherited["images_per_sec"]) == (0, 0.0, None)
    again = load_trainer(model_config(config, planned[1]).model_dir)  # the dir holds the supernet's weights
    assert int(again.optimizer.iterations) == 0 and again.evaluate()["top1"] == pytest.approx(inherited["top1"])
    assert [row["step"] for row in inherited["history"]] == [0] and inherited["eval_correct"]
    export = tmp_path / "export"  # the inherited net leaves as any model dir does: exported with parity
    amoeba_here("evaluate", f"--model_dir={model_config(config, planned[1]).model_dir}", f"--export_dir={export}",
                "--export_format=saved_model,tflite")
    parity = json.load(open(export / "parity.json"))
    assert parity["tflite"]["top1_agreement"] == 1.0 and parity["tflite"]["eval_images"] == 200
    assert parity["tflite"]["top1"] == parity["saved_model"]["top1"] == inherited["top1"]  # what was measured
    assert results[f"{name}-fine-tuned"]["steps"] == 2 and results[name]["steps"] == 3  # of 900 images, 64 a step
    table = comparison_table(config, planned, {})
    assert list(table.status) == ["ok"] * 3 and table.val_images.tolist() == [100] * 3
    times = table.set_index("name")["time_to_top1_0.01_s"]  # the inherited net trained no time to reach it
    assert pd.isna(times[f"{name}-inherited"]) and times[name] > 0 and times[f"{name}-fine-tuned"] > 0
    sentence, = same_net_sentences(table)
    assert sentence.startswith(f"{name}, the same net, on the evaluation split: with the weights it inherits from "
                               f"the supernet (not trained), top-1 {inherited['top1']:.4f}")
    assert "McNemar's paired test on the same 200 images" in sentence
    assert "; fine-tuned from them 0.1 epochs (" in sentence and "; trained from scratch 0.2 epochs (" in sentence


def _write(search_dir, trial_id, model_dir):
    from experiments.commands.inherit import write_subnet_model_dir
    return write_subnet_model_dir(search_dir, trial_id, model_dir, 1.0)
