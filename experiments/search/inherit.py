"""A supernet search's side of a subnet that leaves it with its inherited weights (`amoeba inherit`,
and `amoeba promote`'s inherited and fine-tuned rows): the search read back (its settings, its
journal replayed read only, the proxy task its supernet trained on), the trial chosen, and the
model dir written from its supernet (trainer/subnet_model_dir.py). This module must not parse
flags or train; TensorFlow only inside `write_inherited`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from core import storage
from core.proxy_config import ProxyConfig
from core.train_config import TrainConfig
from evolution import SearchAlgorithm, resume
from experiments.layout import CONFIG, JOURNAL
from experiments.search import ranking
from experiments.search.supernet import supernet_dir, trained


def is_supernet_search(search_dir: str) -> bool:
    """Whether `search_dir` holds a search that scored its nets on a supernet (--evaluator=supernet)."""
    path = os.path.join(search_dir, CONFIG)
    return os.path.exists(path) and storage.read_json(path).get("evaluator", "train") == "supernet"


def read_search(search_dir: str) -> tuple[dict[str, Any], SearchAlgorithm]:
    """A supernet search's saved settings and its algorithm replayed (read only); ValueError naming
    the dir for one that is not a supernet search, or whose supernet is not trained."""
    config_path, journal = os.path.join(search_dir, CONFIG), os.path.join(search_dir, JOURNAL)
    if not (os.path.exists(config_path) and os.path.exists(journal)):
        raise ValueError(f"{search_dir}: no {CONFIG} and {JOURNAL}; give the output dir of an `amoeba search "
                         "--evaluator=supernet`")
    saved = storage.read_json(config_path)
    if saved.get("evaluator", "train") != "supernet":
        raise ValueError(f"{search_dir}: not a supernet search (its {CONFIG} says evaluator "
                         f"{saved.get('evaluator', 'train')!r}): its nets trained from scratch and inherit no "
                         "weights; train one with `amoeba train --model` or `amoeba promote`")
    if trained(search_dir) is None:
        raise ValueError(f"{search_dir}: its supernet is not trained yet (no {supernet_dir(search_dir)}/supernet.json); "
                         "run the search until it is")
    return saved, resume(journal, read_only=True)


def chosen_trial(algorithm: SearchAlgorithm, trial_id: int | None, search_dir: str) -> int:
    """`trial_id`, or the search's best; ValueError naming the trial when it did not end ok."""
    if trial_id is None:
        best = ranking.best(algorithm)
        if best is None:
            raise ValueError(f"{search_dir}: no trial ended ok yet, so there is no best to write")
        return best[0].trial_id
    if trial_id not in algorithm.trials:
        raise ValueError(f"{search_dir}: no trial {trial_id} (its trials: 0 to {len(algorithm.trials) - 1})")
    outcome = algorithm.outcomes.get(trial_id)
    if outcome is None or outcome.status != "ok":
        why = "has not ended" if outcome is None else f"ended {outcome.status}" + (
            f" ({outcome.error})" if outcome.error else "")
        raise ValueError(f"{search_dir}: trial {trial_id} {why}; only a trial that ended ok has a score to inherit")
    return trial_id


def search_proxy(saved: dict[str, Any], search_dir: str) -> ProxyConfig:
    """The proxy task the search trained its supernet on; ValueError for one on no prepared data dir."""
    names = {f.name for f in dataclasses.fields(ProxyConfig)}
    proxy = ProxyConfig(**{k: v for k, v in (saved.get("proxy") or {}).items() if k in names})
    if not proxy.data:
        raise ValueError(f"{search_dir}: it searched on the built-in {proxy.dataset!r} data, not a dir made by "
                         "`amoeba prepare`, which `amoeba train` needs")
    return proxy


def net_changes(proxy: ProxyConfig) -> dict[str, Any]:
    """The TrainConfig fields that make a trained net compute what the supernet's subnet computes:
    the proxy's BN momentum and epsilon where it set them."""
    return {name: getattr(proxy, name) for name in ("bn_momentum", "bn_epsilon") if getattr(proxy, name)}


def write_inherited(search_dir: str, trial_id: int, config: TrainConfig) -> dict[str, Any]:
    """Trial `trial_id` of the supernet search in `search_dir` (its genotype `config.genotype`) as the
    model dir `config.model_dir` at step 0 with its inherited weights; what was written. ValueError
    for a dir that already holds a checkpoint, or another genotype than the trial's."""
    from trainer.subnet_model_dir import existing_checkpoint, write_model_dir

    saved, algorithm = read_search(search_dir)
    tid = chosen_trial(algorithm, trial_id, search_dir)
    if algorithm.trials[tid].genotype.key() != config.genotype.key():
        raise ValueError(f"{config.model_dir}: trial {tid} of {search_dir} is {algorithm.trials[tid].genotype.key()}, "
                         f"not {config.genotype.key()}")
    found = existing_checkpoint(config.model_dir)  # before the supernet is loaded (write_model_dir checks too)
    if found:
        raise ValueError(f"{config.model_dir}: already holds a checkpoint ({found}); give a new --model_dir")
    metrics = algorithm.outcomes[tid].metrics
    source = {"search_dir": os.path.abspath(search_dir), "trial_id": tid,
              "val_accuracy": metrics.get("val_accuracy"), "validation_images": metrics.get("validation_images")}
    written = write_model_dir(config, algorithm.space, search_proxy(saved, search_dir), supernet_dir(search_dir),
                              source)
    return {**source, **written}
