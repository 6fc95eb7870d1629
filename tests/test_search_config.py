"""Opening a search dir: new, resumed, or refused when the settings would mix trials."""

import dataclasses

import pytest

from experiments.search import SearchConfig, open_search
from trainer.proxy import ProxyConfig


def test_resume_allows_time_limits_and_refuses_fitness_changes(tmp_path):
    config = SearchConfig(output_dir=str(tmp_path), max_trials=5, population_size=4, sample_size=2)
    first = open_search(config)
    trial = first.ask()
    first.close()

    longer = dataclasses.replace(config, max_trials=9, proxy=ProxyConfig(timeout_s=5.0, threads=1))
    resumed = open_search(longer)
    assert resumed.ask() == trial  # re-issued
    resumed.close()

    for change, message in [
        ({"seed": 1}, "seed: 0 in the journal, 1 now"),
        ({"sample_size": 3}, "sample_size"),
        ({"proxy": ProxyConfig(filters=16)}, "proxy filters: 8 before, 16 now"),
        ({"algorithm": "random"}, "algorithm"),
    ]:
        with pytest.raises(ValueError, match=message):
            open_search(dataclasses.replace(config, **change))


def test_population_settings_do_not_matter_to_random_search(tmp_path):
    config = SearchConfig(output_dir=str(tmp_path), algorithm="random", population_size=4, sample_size=2)
    open_search(config).close()
    open_search(dataclasses.replace(config, population_size=50, sample_size=7)).close()


def test_config_is_written_before_the_journal(tmp_path):
    with pytest.raises(ValueError, match="sample_size"):
        open_search(SearchConfig(output_dir=str(tmp_path), population_size=2, sample_size=5))
    assert not (tmp_path / "journal.jsonl").exists()
    open_search(SearchConfig(output_dir=str(tmp_path))).close()  # the failed attempt blocks nothing


def test_a_search_made_before_the_data_settings_existed_still_resumes(tmp_path):
    import json

    config = SearchConfig(output_dir=str(tmp_path), population_size=4, sample_size=2)
    open_search(config).close()
    saved = json.loads((tmp_path / "search_config.json").read_text())
    for name in ("data", "image_size", "validation_images", "train_images"):
        del saved["proxy"][name]  # as an older amoeba-nas wrote it
    (tmp_path / "search_config.json").write_text(json.dumps(saved))
    open_search(config).close()
    open_search(dataclasses.replace(config, proxy=ProxyConfig(image_size=8))).close()  # digits' own size
    with pytest.raises(ValueError, match="proxy image_size: 8 before, 16 now"):
        open_search(dataclasses.replace(config, proxy=ProxyConfig(image_size=16)))


def test_a_proxy_that_cannot_feed_a_batch_fails_before_the_journal(tmp_path):
    with pytest.raises(ValueError, match="digits: 1797 training-split images leave 0 to train on"):
        open_search(SearchConfig(output_dir=str(tmp_path), proxy=ProxyConfig(validation_images=5000)))
    assert not (tmp_path / "journal.jsonl").exists()
