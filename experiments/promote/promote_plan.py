"""The plan of a promote: which models (the searched cells a search ranks first, or first again at
--at_target, with --audit_k some from lower down, and the baselines), at which size, and each one's
TrainConfig; fixed by the first run in `promote_plan.json`, which a rerun must match. A searched
net that builds the same network as a baseline (airbench94's seed kept by a search) is trained
once, under the baseline's name. A supernet search's nets are also planned with the weights they
inherit (kind INHERITED, evaluated as they are) and, with --finetune_epochs, fine-tuned from them.
This module must not train, parse flags or import Ray; TensorFlow only to size cells (--match_params).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from evolution import SearchAlgorithm, resume
from searchspace import MacroGenotype, genotype_from_json
from experiments.search import ranking
from experiments.layout import CONFIG, JOURNAL, PLAN
from experiments.search.results import searched_target
from experiments.promote.comparison import FINE_TUNED, INHERITED
from experiments.promote.promote_config import PromoteConfig, baseline_model, with_new_recipe_fields
from experiments.promote.seed_race import with_seed_runs
from core import storage
from core.train_config import TrainConfig, at_epochs, genotype_model

MATCH_TOLERANCE = 0.1  # the paper compares cells at equal size: within 10% of the target's parameters


@dataclass(frozen=True)
class PlannedModel:
    name: str  # its dir under models/ and its row of the comparison
    kind: str  # "searched" or "baseline"
    model: str  # a MODEL_FAMILIES name
    genotype: dict[str, Any] | None = None
    filters: int | None = None  # set by --match_params for searched cells
    search_trial_id: int | None = None
    search_rank: int | None = None  # 1: the search's pick, as it ranked the cells promoted from it
    search_val_accuracy: float | None = None
    search_dir: str | None = None
    width_multiplier: float | None = None  # a baseline's NAME@WIDTH
    same_as: str | None = None  # a baseline that builds the same network: trained once, under its name
    recipe_changes: dict[str, Any] | None = None  # an inherited or fine-tuned net's: its BN settings, its epochs


def best_distinct_trials(algorithm: SearchAlgorithm, k: int) -> list[int]:
    """Ids of the k best distinct genotypes' trials as the search ranks them (experiments/search/ranking.py:
    its score and mode, like with like across rungs; ties: fewer parameters, then the earlier trial).
    A search of several goals (Pareto evolution): k cells evenly spaced along its front in the order
    of its last goal (the cost), cheapest to dearest, then the best others."""
    if len(algorithm.goals) <= 1:
        return ranking.ranked(algorithm, k, distinct=True)
    spread = ranking.spread_along_front(algorithm, k)
    rest = [tid for tid in ranking.ranked(algorithm) if tid not in spread]
    return ranking.first(algorithm, spread + rest, k)


def _search_accuracy(result: dict[str, Any], objective: str) -> float:
    """The search's validation accuracy of a trial (its objective where it reports none: a function
    of one's own); a time-to-accuracy search's objective is seconds."""
    return float(result.get("val_accuracy", result[objective]))


def _search_order(algorithm: SearchAlgorithm, search_dir: str, k: int,
                  at_target: float | None) -> tuple[list[int], Callable[[], list[int]]]:
    """The k distinct trials to promote, and (lazily) every distinct trial in the order they were
    ranked by: the search's own rule (best_distinct_trials), or with `at_target` its trials' times
    to that lower accuracy from their evaluations (experiments/search/ranking.py `rescored`)."""
    if at_target is None:
        return best_distinct_trials(algorithm, k), lambda: ranking.ranked(algorithm, distinct=True)
    try:
        scores = ranking.rescored(algorithm, searched_target(search_dir), at_target)
    except ValueError as err:
        raise ValueError(f"--search_dir {search_dir}: {err}") from None
    order = ranking.ranked_by(algorithm, scores, distinct=True)
    return order[:k], lambda: order


def top_genotypes(search_dir: str, k: int, audit_k: int = 0, at_target: float | None = None) -> list[PlannedModel]:
    """The search's best_distinct_trials (with `at_target`, its trials ranked again at that lower
    accuracy), as models to promote, each with its rank among them as the search ranks
    (experiments/search/ranking.py; a Pareto search's are spread along its front); with `audit_k`, that many
    more distinct trials drawn at random (seeded by the dir's name) from those ranked below, each
    with its rank among all the search's distinct trials."""
    path = os.path.join(search_dir, JOURNAL)
    if not os.path.exists(path):
        raise FileNotFoundError(f"--search_dir {search_dir}: no {JOURNAL}; is it an `amoeba search` output dir?")
    algorithm = resume(path, read_only=True)
    chosen, everyone_ranked = _search_order(algorithm, search_dir, k, at_target)
    if not chosen and k:
        raise ValueError(f"--search_dir {search_dir}: no successful trial to promote")
    prefix = os.path.basename(os.path.normpath(search_dir))
    by_rank = chosen if len(algorithm.goals) <= 1 else ranking.ranked(algorithm, among=chosen)  # a front's: spread
    rank = {tid: i + 1 for i, tid in enumerate(by_rank)}
    if audit_k:
        everyone = everyone_ranked()
        keys = {algorithm.trials[tid].genotype.key() for tid in chosen}
        rest = [tid for tid in everyone if algorithm.trials[tid].genotype.key() not in keys]
        audited = random.Random(f"audit:{prefix}").sample(rest, min(audit_k, len(rest)))
        rank.update({tid: everyone.index(tid) + 1 for tid in audited})
        chosen = chosen + sorted(audited, key=rank.get)
    return [PlannedModel(name=f"{prefix}-trial{tid}", kind="searched",
                         model=genotype_model(algorithm.trials[tid].genotype),
                         genotype=algorithm.trials[tid].genotype.to_json(), search_trial_id=tid,
                         search_rank=rank[tid],
                         search_val_accuracy=_search_accuracy(ranking.result_of(algorithm, tid),
                                                              algorithm.objective),
                         search_dir=os.path.abspath(search_dir))
            for tid in chosen]


def at_given_size(config: PromoteConfig, m: PlannedModel) -> PlannedModel:
    """A macro genotype at --filters and --num_cells where the command line gives them; its own size
    otherwise. Other models as they are (their size is the recipe's)."""
    sizes = {"filters": "filters", "num_cells": "cells"}
    given = {sizes[k]: config.recipe[k] for k in config.size_flags if k in sizes}
    if m.model != "nasnet_macro" or not given:
        return m
    return dataclasses.replace(m, genotype=genotype_from_json(m.genotype).resized(**given).to_json())


def own_size_searches(search_dirs: tuple[str, ...]) -> bool:
    """Whether every search of `search_dirs` searched whole networks (macro or convnet genotypes:
    they train at their own size, not sized to a baseline)."""
    def space(d: str) -> str:
        path = os.path.join(d, CONFIG)
        return storage.read_json(path).get("proxy_space", "nasnet") if os.path.exists(path) else "nasnet"
    return bool(search_dirs) and all(space(d) in ("nasnet_macro", "convnet") for d in search_dirs)


def plan_models(config: PromoteConfig) -> list[PlannedModel]:
    """The searched cells (sized to --match_params when given) and the baselines to train."""
    planned = [at_given_size(config, m) for d in config.search_dirs
               for m in top_genotypes(d, config.top_k, config.audit_k, config.at_target)]
    names = [m.name for m in planned]
    if len(set(names)) < len(names):
        raise ValueError(f"two --search_dir have the same folder name: {names}")
    if config.match_params and planned:
        from trainer.models import count_params, match_filters, model_spec
        from trainer.records import read_metadata

        classes = read_metadata(config.data).num_classes

        def spec(model: str, genotype: Any = None, **changes: Any):
            return model_spec(config.train_config("sizing", model, genotype, **changes), classes)

        if config.match_params.isdigit():
            target = int(config.match_params)
        else:
            model, width = baseline_model(config.match_params)
            target = count_params(spec(model, **({"width_multiplier": width} if width else {})))
        sized = []
        for m in planned:
            try:
                filters, params = match_filters(spec(m.model, genotype_from_json(m.genotype)), target,
                                                MATCH_TOLERANCE)
            except ValueError as err:
                raise ValueError(f"--match_params={config.match_params} ({target:,} parameters), {m.name}: {err}") \
                    from None
            print(f"{m.name}: F={filters}, {params:,} parameters ({params / target - 1:+.1%} of {target:,})")
            sized.append(dataclasses.replace(m, filters=filters))
        planned = sized
    planned = with_inherited(config, planned)
    for b in config.baselines:
        model, width = baseline_model(b)
        planned.append(PlannedModel(name=b, kind="baseline", model=model, width_multiplier=width))
    planned = with_twins_marked(config, planned)
    if config.race_seeds > 1:  # the race at each net's own pace (experiments/promote/seed_race.py)
        planned = with_seed_runs(planned, int(config.recipe.get("seed") or 0), config.race_seeds)
    return planned


def with_inherited(config: PromoteConfig, planned: list[PlannedModel]) -> list[PlannedModel]:
    """`planned` with, after each searched net of a supernet search (at its own size), the same net
    with the weights it inherits from the search's supernet (evaluated as they are: kind INHERITED)
    and, with --finetune_epochs, fine-tuned from them (FINE_TUNED); ValueError for --finetune_epochs
    when no promoted net inherits weights."""
    from experiments.search.inherit import is_supernet_search, net_changes, search_proxy

    out, inheriting = [], False
    for m in planned:
        out.append(m)
        if m.kind != "searched" or not m.search_dir or m.filters or not is_supernet_search(m.search_dir):
            continue
        try:
            proxy = search_proxy(storage.read_json(os.path.join(m.search_dir, CONFIG)), m.search_dir)
            misfit = inherit_misfit(config, proxy)
        except ValueError as err:
            misfit = str(err)
        if misfit:
            print(f"{m.name}: no inherited row ({misfit})")
            continue
        inheriting, net = True, net_changes(proxy)
        out.append(dataclasses.replace(m, name=f"{m.name}-{INHERITED}", kind=INHERITED, recipe_changes=net or None))
        if config.finetune_epochs:
            out.append(dataclasses.replace(m, name=f"{m.name}-{FINE_TUNED}", kind=FINE_TUNED, recipe_changes={
                **net, **at_epochs(config.recipe, config.finetune_epochs)}))
    if config.finetune_epochs and not inheriting:
        raise ValueError("finetune_epochs: no promoted net inherits weights to fine-tune (only the nets of an "
                         "`amoeba search --evaluator=supernet` on a prepared data dir, at their own size, do)")
    return out


def inherit_misfit(config: PromoteConfig, proxy: Any) -> str | None:
    """Why the promote's recipe cannot take a net of the supernet trained on `proxy` as it inherits it
    (another width, image size or set of labels), or None."""
    width, size = float(config.recipe.get("width_multiplier") or 1.0), config.recipe.get("image_size")
    if width != 1.0:
        return f"the recipe's --width_multiplier={width:g} builds other widths than the supernet's"
    if size != proxy.input_size:
        return f"the supernet trained at {proxy.input_size} pixels, the recipe's --image_size is {size}"
    mine, theirs = (storage.join(d, "labels.txt") for d in (config.data, proxy.data))
    if mine != theirs and storage.exists(mine) and storage.exists(theirs) and \
            storage.read_text(mine).split() != storage.read_text(theirs).split():
        return f"--data {config.data} has other labels than the search's {proxy.data}"
    return None


def with_twins_marked(config: PromoteConfig, planned: list[PlannedModel]) -> list[PlannedModel]:
    """`planned` with each searched convnet that builds the same network as a baseline, at the widths
    they train at, marked `same_as` that baseline (a search that kept its airbench94 seed): it is
    trained once, and its comparison row is that training's."""
    from searchspace.convnet import ConvNetGenotype, at_width, family_network

    recipe_width = float(config.recipe.get("width_multiplier") or 1.0)
    built: dict[str, str] = {}
    for m in planned:
        network = family_network(m.model, m.width_multiplier or recipe_width) if m.kind == "baseline" else None
        if network is not None:
            built.setdefault(network.key(), m.name)
    marked = []
    for m in planned:
        convnet = m.kind == "searched" and m.model == "convnet" and m.genotype and not m.filters
        genotype = genotype_from_json(m.genotype) if convnet else None
        twin = built.get(at_width(genotype, recipe_width).key()) if isinstance(genotype, ConvNetGenotype) else None
        if twin:
            print(f"{m.name}: the same network as {twin}: trained once, its row that training's")
        marked.append(dataclasses.replace(m, same_as=twin) if twin else m)
    return marked


def default_match_params(output_dir: str, baselines: tuple[str, ...], searched: bool, filters_given: bool
                         ) -> tuple[str | None, str | None]:
    """--match_params when it is not given, and a note to print: a promote already planned keeps what
    its plan was made with (so the same command resumes it); a new one promoting searched cells
    beside baselines, at no --filters of the user's, sizes them to the first baseline (a comparison
    is fair at equal size)."""
    plan = storage.join(output_dir, PLAN)
    if storage.exists(plan):
        return storage.read_json(plan)["settings"].get("match_params"), None
    if baselines and searched and not filters_given:
        return baselines[0], (f"comparing at equal size: each cell's filters are set to match {baselines[0]}'s "
                              "parameters (--filters=F or --match_params=MODEL|COUNT to choose)")
    return None, None


def model_config(config: PromoteConfig, m: PlannedModel) -> TrainConfig:
    """The TrainConfig `m` trains with: its baseline's, model dir included, when it has a twin."""
    if m.same_as:
        model, width = baseline_model(m.same_as)
        return model_config(config, PlannedModel(m.same_as, "baseline", model, width_multiplier=width))
    genotype = genotype_from_json(m.genotype) if m.genotype else None
    changes = {"filters": m.filters} if m.filters else {}
    if m.filters and isinstance(genotype, MacroGenotype):  # a macro genotype's F is its own: sized, it is another genotype
        genotype, changes = genotype.resized(filters=m.filters), {}
    if m.width_multiplier:
        changes["width_multiplier"] = m.width_multiplier
    changes.update(m.recipe_changes or {})
    return config.train_config(m.name, m.model, genotype, **changes)


def open_plan(config: PromoteConfig) -> list[PlannedModel]:
    """The plan of output_dir: made and saved by the first run; a rerun must have the same settings
    (ValueError naming those that differ), and gets the saved plan."""
    path = storage.join(config.output_dir, PLAN)
    settings = config.settings()
    if storage.exists(path):
        saved = storage.read_json(path)
        changed = changed_keys(with_new_recipe_fields(saved["settings"], settings), settings)
        if changed:
            raise ValueError(f"{config.output_dir} was promoted with other settings ({'; '.join(changed)}): "
                             "rerun with the same flags to resume it, or use a new --output_dir")
        return [PlannedModel(**m) for m in saved["models"]]
    planned = plan_models(config)
    storage.write_json(path, {"settings": settings, "models": [dataclasses.asdict(m) for m in planned],
                              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return planned


def changed_keys(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """`name: old -> new` for each key that differs between two plans' settings (plain JSON dicts:
    the plan stores the resolved values, not a config class, so experiments/settings.py's
    `changed_settings` does not apply), a nested one (the recipe's) by its own dotted name, so a
    changed learning rate reads `recipe.learning_rate: 0.1 -> 0.05`."""
    changed = []
    for key in sorted(set(saved) | set(now)):
        old, new = saved.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += changed_keys(old, new, f"{prefix}{key}.")
        elif old != new:
            changed.append(f"{prefix}{key}: {old!r} -> {new!r}")
    return changed
