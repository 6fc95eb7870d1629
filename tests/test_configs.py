"""Every promote config in experiments/configs builds a valid promote and a valid training recipe for
each of its baselines (the search configs: tests/search/test_search_config.py; airbench94's: test_airbench.py)."""

import os

import pytest

from tests.conftest import REPO

CONFIGS = os.path.join(REPO, "experiments", "configs")


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(CONFIGS) if n.startswith("promote_") and n.endswith(".cfg")))
def test_every_promote_config_is_a_valid_promote(name, tmp_path):
    from experiments.commands import promote
    from experiments.promote.driver import PromoteConfig
    from experiments.promote.promote_config import baseline_model
    from experiments.recipe_flags import recipe_from_flags
    from experiments.settings import build, flag_settings

    promote.FLAGS.unparse_flags()
    try:
        promote.FLAGS(["amoeba promote", f"--flagfile={os.path.join(CONFIGS, name)}", "--data=d",
                       f"--output_dir={tmp_path}"])
        fields = flag_settings(promote.SETTINGS, promote.FLAGS)
        config = build(PromoteConfig, {**fields, "recipe": recipe_from_flags(promote.FLAGS, "promote")})
    finally:
        promote.FLAGS.unparse_flags()
    assert config.baselines or config.search_dirs
    for baseline in config.baselines:
        model, width = baseline_model(baseline)
        config.train_config(baseline, model, **({"width_multiplier": width} if width else {}))  # validates it


def test_prepare_and_benchmark_define_each_flag_as_one_field_of_their_configs():
    """Issue 37: no flag of these commands is defined by hand; each limited measure has its limit."""
    import dataclasses

    from core.prepare_config import FakeImagenetConfig, PrepareConfig, PrepareMode
    from evolution.objectives import LIMITED
    from experiments.simulate.benchmark_config import LIMIT_FIELDS, BenchmarkConfig
    from experiments.commands import benchmark, prepare

    def names(*classes):
        return sorted(f.name for cls in classes for f in dataclasses.fields(cls))

    assert sorted(prepare.FLAGS) == names(PrepareMode, PrepareConfig, FakeImagenetConfig)
    assert sorted(benchmark.FLAGS) == names(BenchmarkConfig)
    assert set(LIMIT_FIELDS) == {f"max_{m}" for m in LIMITED} <= set(names(BenchmarkConfig))
    assert benchmark.FLAGS["population_size"].default == 10 and "tournament" in benchmark.FLAGS
