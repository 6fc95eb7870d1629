"""Opening a search dir: new, resumed, or refused when the settings would mix trials."""

import dataclasses
import json
import os

import pytest

from evolution import resume
from experiments.search.driver import CircuitBreaker, SearchConfig, open_search, trial_resources
from core.proxy_config import ProxyConfig
from searchspace.convnet import AIRBENCH94
from tests.conftest import REPO


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
        ({"max_latency_ms": 5.0}, "limits: {} in the journal, {'latency_ms': 5.0} now"),
        ({"latency_target_ms": 3.0}, "reward: None in the journal"),
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

    proxy = ProxyConfig(train_batch_size=32, lr_warmup_epochs=0.5)  # not the defaults: the old names are read
    config = SearchConfig(output_dir=str(tmp_path), population_size=4, sample_size=2, proxy=proxy)
    open_search(config).close()
    saved = json.loads((tmp_path / "search_config.json").read_text())
    for name in ("data", "image_size", "validation_images", "train_images", "train_seconds", "target_clock",
                 "lr_schedule", "label_smoothing", "eval_tta"):
        del saved["proxy"][name]  # as an older amoeba-nas wrote it
    saved["proxy"]["max_params"] = 0  # a setting since moved out of the proxy
    for old, new in (("batch_size", "train_batch_size"), ("warmup_epochs", "lr_warmup_epochs")):
        saved["proxy"][old] = saved["proxy"].pop(new)  # its names before they were amoeba train's
    (tmp_path / "search_config.json").write_text(json.dumps(saved))
    journal = (tmp_path / "journal.jsonl").read_text().splitlines()
    start = json.loads(journal[0])
    del start["limits"], start["reward"]  # a journal from before limits and rewards
    (tmp_path / "journal.jsonl").write_text("\n".join([json.dumps(start), *journal[1:]]) + "\n")
    open_search(config).close()  # batch_size 32 and warmup_epochs 0.5 read as today's names
    open_search(dataclasses.replace(config, proxy=dataclasses.replace(proxy, image_size=8))).close()  # digits' own
    with pytest.raises(ValueError, match="proxy image_size: 8 before, 16 now"):
        open_search(dataclasses.replace(config, proxy=dataclasses.replace(proxy, image_size=16)))
    with pytest.raises(ValueError, match="proxy train_batch_size: 32 before, 64 now"):
        open_search(dataclasses.replace(config, proxy=dataclasses.replace(proxy, train_batch_size=64)))


@pytest.mark.parametrize("settings, message", [
    ({"tpus_per_trial": 4, "max_latency_ms": 5.0}, "max_latency_ms: TPU trials"),
    ({"tpus_per_trial": 4, "proxy": ProxyConfig(label_smoothing=0.1, lookahead_every=5)},
     "label_smoothing, lookahead_every: TPU trials train the proxy's plain recipe"),
    ({"proxy": ProxyConfig(train_seconds=800)}, "train_seconds: 800 s leaves no room under the trial timeout of 900 s"),
    ({"proxy": ProxyConfig(whiten_bias_epochs=3)}, "whiten_bias_epochs: only the convnet space's nets"),
    ({"rungs": (1, 3), "proxy": ProxyConfig(train_seconds=60)}, "replaces --rungs"),
    ({"rungs": (1, 3), "proxy": ProxyConfig(target_accuracy=0.7, target_seconds=60)}, "replaces --rungs"),
    ({"algorithm": "pareto_evolution", "proxy": ProxyConfig(target_accuracy=0.7, target_seconds=60)},
     "time to accuracy is one objective"),
    ({"objectives": ("val_accuracy:max", "latency_ms:min")}, "need --algorithm=pareto_evolution"),
    ({"max_params": 1000, "min_params": 2000}, "min_params: 2000 is over max_params"),
    ({"algorithm": "pareto_evolution", "objectives": ("val_accuracy:max", "latency:min")}, "unknown measure"),
    ({"latency_target_ms": 5.0, "objective": "val_loss", "mode": "min"}, "would favour the dearer cell"),
])
def test_cost_settings_that_cannot_work_are_config_errors(settings, message):
    with pytest.raises(ValueError, match=message):
        SearchConfig(output_dir="unused", **settings)


@pytest.mark.parametrize("proxy, message", [
    ({"target_accuracy": 0.7}, "needs --target_seconds"),
    ({"target_seconds": 60}, "only with --target_accuracy"),
    ({"target_accuracy": 70, "target_seconds": 60}, r"a fraction in \[0, 1\)"),
    ({"target_accuracy": 0.7, "target_seconds": 60, "train_seconds": 60}, "replaces --train_seconds"),
    ({"target_accuracy": 0.7, "target_seconds": 800}, "leaves no room under the trial timeout of 900 s"),
    ({"weight_decay": -1e-4}, "weight_decay: must be >= 0"),
])
def test_time_to_accuracy_settings_that_cannot_work_are_config_errors(proxy, message):
    with pytest.raises(ValueError, match=message):
        ProxyConfig(**proxy)


def test_a_time_to_accuracy_search_minimises_seconds_to_target():
    config = SearchConfig(output_dir="x", proxy=ProxyConfig(target_accuracy=0.7, target_seconds=60))
    assert (config.objective, config.mode) == ("seconds_to_target", "min")
    assert (SearchConfig(output_dir="x").objective, SearchConfig(output_dir="x").mode) == ("val_accuracy", "max")


def test_a_time_to_accuracy_search_made_on_the_training_only_clock_is_not_resumed(tmp_path):
    config = SearchConfig(output_dir=str(tmp_path), population_size=4, sample_size=2,
                          proxy=ProxyConfig(target_accuracy=0.7, target_seconds=60))
    open_search(config).close()
    saved = json.loads((tmp_path / "search_config.json").read_text())
    assert saved["proxy"]["target_clock"] == "training_and_evaluations"
    open_search(config).close()  # the same clock: resumed
    steady = dataclasses.replace(config, proxy=dataclasses.replace(config.proxy, target_clock="steady"))
    with pytest.raises(ValueError, match="target_clock: 'training_and_evaluations' before, 'steady' now"):
        open_search(steady)  # another clock: its trials and the journal's would not compare
    del saved["proxy"]["target_clock"]  # as amoeba-nas wrote it when the clock counted training only
    (tmp_path / "search_config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="proxy target_clock: its trials' seconds_to_target counted training only and a "
                                         "hit after target_seconds scored its time.* use a new --output_dir"):
        open_search(config)


def test_a_proxy_that_cannot_feed_a_batch_fails_before_the_journal(tmp_path):
    with pytest.raises(ValueError, match="digits: 1797 training-split images leave 0 to train on"):
        open_search(SearchConfig(output_dir=str(tmp_path), proxy=ProxyConfig(validation_images=5000)))
    assert not (tmp_path / "journal.jsonl").exists()


@pytest.mark.parametrize("asked, cluster, resources, concurrent", [
    ({}, {"CPU": 2}, {"CPU": 1}, 2),  # the default: one trial per CPU
    ({"max_concurrent": 2}, {"CPU": 16}, {"CPU": 8}, 2),
    ({"cpus_per_trial": 4}, {"CPU": 16}, {"CPU": 4}, 4),
    ({"gpus_per_trial": 0.5}, {"CPU": 16, "GPU": 2}, {"CPU": 4, "GPU": 0.5}, 4),  # two trials per GPU
    ({"gpus_per_trial": 0.5}, {"CPU": 2, "GPU": 4}, {"CPU": 0.25, "GPU": 0.5}, 8),  # CPUs shared
    ({"tpus_per_trial": 4}, {"CPU": 96, "TPU": 8}, {"CPU": 48, "TPU": 4}, 2),
    ({"gpus_per_trial": 1, "cpus_per_trial": 1}, {"CPU": 2, "GPU": 8}, {"CPU": 1, "GPU": 1}, 2),  # CPUs bind
])
def test_concurrency_follows_the_cluster_resources(asked, cluster, resources, concurrent):
    assert trial_resources(SearchConfig(output_dir="x", **asked), cluster) == (resources, concurrent)


def test_a_cluster_without_the_accelerators_asked_for_is_a_config_error():
    with pytest.raises(ValueError, match=r"the Ray cluster has 0 GPU: not enough for one trial \(1 GPU per trial\)"):
        trial_resources(SearchConfig(output_dir="x", gpus_per_trial=1), {"CPU": 8})


def test_the_circuit_breaker_trips_on_failures_in_a_row_only():
    breaker = CircuitBreaker(3)
    for status in ("failed", "failed", "ok", "failed", "failed"):
        breaker.record(status, f"error {status}" if status != "ok" else None)
    assert not breaker.tripped and breaker.in_a_row == 2
    breaker.record("failed", "timeout: trial 7")
    assert breaker.tripped and breaker.last_error == "timeout: trial 7"
    assert not CircuitBreaker(0).tripped


OLD_FLAGS = (  # `amoeba search`'s flags before they came from the fields: each still works
    "output_dir algorithm data dataset image_size validation_images train_images max_trials population_size "
    "sample_size max_concurrent epochs rungs reduction_factor num_cells filters batch_size learning_rate num_blocks "
    "seed trial_timeout_s cpus_per_trial gpus_per_trial tpus_per_trial precision max_params max_multiply_adds "
    "max_latency_ms latency_target_ms latency_weight cost_metric objectives train_seconds max_failures "
    "max_consecutive_failures reuse_workers ray_address initial upload_to").split()


def test_every_search_flag_comes_from_a_field_and_keeps_its_name():
    from experiments.commands import search

    from core.proxy_config import PROXY_RENAMED

    assert set(OLD_FLAGS) <= set(search.FLAGS)
    assert {s.flag for s in search.SETTINGS} == set(search.FLAGS) - {"help", "helpshort", "helpfull", "helpxml",
                                                                     "flagfile", "undefok", "?"} - set(PROXY_RENAMED)


def test_a_new_setting_is_one_field_and_so_a_flag_a_keyword_and_compared_on_resume(tmp_path):
    from absl import flags

    from experiments import api
    from experiments.commands.search import config_from_flags, define_search_flags
    from searchspace import ChoiceSpace

    @dataclasses.dataclass(frozen=True)
    class WithKnob(SearchConfig):
        knob: int = dataclasses.field(default=3, metadata={"help": "A new knob."})

    values = flags.FlagValues()
    settings = define_search_flags(values, WithKnob)
    values(["amoeba", f"--output_dir={tmp_path}", "--knob=5", "--population_size=4", "--sample_size=2"])
    config = config_from_flags(values, settings, WithKnob)
    assert (config.knob, config.population_size, values["knob"].help) == (5, 4, "A new knob.")

    space = ChoiceSpace({"x": [1, 2]})
    assert api.search_config(print, space, {"output_dir": "o", "knob": 7}, WithKnob).knob == 7
    with pytest.raises(TypeError, match="'knobs' \\(did you mean 'knob'\\?\\)"):
        api.search_config(print, space, {"output_dir": "o", "knobs": 7}, WithKnob)

    open_search(config).close()
    open_search(dataclasses.replace(config, max_trials=50, max_concurrent=2)).close()  # how it runs: free
    with pytest.raises(ValueError, match="knob: 5 before, 6 now"):
        open_search(dataclasses.replace(config, knob=6))


def test_population_and_sample_size_are_declared_once_by_the_algorithm():
    from evolution.params import EvolutionParams

    fields = {f.name: f for f in dataclasses.fields(SearchConfig)}
    for declared in dataclasses.fields(EvolutionParams):
        assert fields[declared.name].default == declared.default
        assert fields[declared.name].metadata["help"] == declared.metadata["help"]


def test_api_search_takes_every_setting_as_a_keyword():
    import inspect

    from experiments import api
    from experiments.settings import keywords

    shown = inspect.signature(api.search).parameters
    assert set(keywords(SearchConfig)) <= set(shown)
    assert shown["population_size"].default == SearchConfig(output_dir="x").population_size


@pytest.mark.parametrize("first, trips", [
    ("the trial finished without reporting 'val_accuracy' (it reported ['accuracy'])", True),  # the user's bug
    ("RuntimeError: no good at x=1 (at train.py:20)", True),
    ("ResourceExhaustedError: OOM when allocating tensor (at candidate.py:3)", False),  # a candidate too large
    ("NaN loss: mean training loss nan in epoch 0", False),
    ("timeout: trial 5 still running after 3 s (hung)", False),
])
def test_the_breaker_trips_at_a_first_failure_that_says_the_code_is_wrong(first, trips):
    breaker = CircuitBreaker(5, code_errors=True)  # a training function of one's own
    breaker.record("failed", first)
    assert breaker.tripped is trips and (breaker.code_error == first) is trips
    proxy = CircuitBreaker(5)  # the proxy trainer's failures are its candidates' or its data's: counted
    proxy.record("failed", first)
    assert not proxy.tripped and proxy.in_a_row == 1
    after_a_success = CircuitBreaker(5, code_errors=True)  # once a trial has succeeded, the code works: a failure is the candidate's
    after_a_success.record("ok", None)
    after_a_success.record("failed", first)
    assert not after_a_success.tripped
    assert not CircuitBreaker(0).tripped


def test_retry_failed_trains_the_failed_trials_again_with_their_ids_journaled(tmp_path):
    config = SearchConfig(output_dir=str(tmp_path / "s"), max_trials=4, population_size=2, sample_size=2,
                          trainable="mine", objective="score")
    search = open_search(config)
    trials = [search.ask() for _ in range(3)]
    search.tell(trials[0].trial_id, {"score": 0.5})
    search.tell(trials[1].trial_id, error="the trial finished without reporting 'score' (it reported ['acc'])")
    search.tell(trials[2].trial_id, error="RuntimeError: typo (at mine.py:9)")
    search.close()

    again = open_search(dataclasses.replace(config, retry_failed=True))
    assert again.completed() == 1 and sorted(again.pending()) == [1, 2]
    assert [again.ask().trial_id, again.ask().trial_id] == [1, 2]  # the same ids, re-issued
    again.tell(1, {"score": 0.7})
    again.close()
    replayed = resume(str(tmp_path / "s" / "journal.jsonl"), read_only=True)
    assert replayed.outcomes[1].status == "ok" and 2 not in replayed.outcomes and replayed.completed() == 2
    events = [json.loads(line)["event"] for line in open(tmp_path / "s" / "journal.jsonl")]
    assert events.count("retry") == 2
    with_rungs = dataclasses.replace(config, output_dir=str(tmp_path / "r"), rungs=(1, 2))
    open_search(with_rungs).close()
    with pytest.raises(ValueError, match="retry_failed: not with rungs"):  # a rung's state would stay behind
        open_search(dataclasses.replace(with_rungs, retry_failed=True))
    open_search(with_rungs).close()  # the refusal left the journal's lock free


def test_a_search_that_breeds_no_child_and_a_resume_with_fewer_trials_are_warned_once_each(tmp_path, caplog):
    caplog.set_level("WARNING", logger="experiments")
    config = SearchConfig(output_dir=str(tmp_path), max_trials=4, population_size=4, sample_size=2)
    open_search(config).close()
    assert [r.getMessage() for r in caplog.records] == [
        "warning: max_trials 4 is not above population_size 4: every trial is a random (or --initial) cell "
        "and no child is bred; give more trials or a smaller population"]
    caplog.clear()
    open_search(dataclasses.replace(config, max_trials=9)).close()  # more: nothing to say
    assert caplog.records == []
    seeded = SearchConfig(output_dir=str(tmp_path / "seeded"), max_trials=4, population_size=6, sample_size=3,
                          proxy_space="convnet", initial=(AIRBENCH94.to_json(),) * 5, repeats="reuse",
                          proxy=ProxyConfig(image_size=32))
    open_search(seeded).close()  # the seed trained once, one random: 2 of the 6 paid for; 4 trials breed 2
    assert caplog.records == []
    open_search(dataclasses.replace(seeded, output_dir=str(tmp_path / "seeded2"), max_trials=2)).close()
    assert [r.getMessage() for r in caplog.records] == [
        "warning: max_trials 2 is not above population_size 6 (2 of its first population trained: --repeats=reuse): "
        "every trial is a random (or --initial) cell and no child is bred; give more trials or a smaller population"]
    caplog.clear()
    open_search(dataclasses.replace(config, max_trials=6)).close()
    assert [r.getMessage() for r in caplog.records] == [
        "warning: max_trials 6 is fewer than the 9 this search was last run with: it stops at 6 trials"]
    caplog.clear()
    mine = SearchConfig(output_dir=str(tmp_path / "mine"), algorithm="random", max_trials=9, trainable="mine",
                        objective="score")
    search = open_search(mine)
    for _ in range(3):
        search.tell(search.ask().trial_id, {"score": 0.5})
    search.close()
    caplog.clear()
    open_search(dataclasses.replace(mine, max_trials=2)).close()  # fewer than it already has
    assert [r.getMessage() for r in caplog.records] == [
        "warning: max_trials 2 is fewer than the 9 this search was last run with: it already has 3 results, so no "
        "new trial is started"]
    caplog.clear()
    open_search(SearchConfig(output_dir=str(tmp_path / "random"), algorithm="random", max_trials=2)).close()
    assert caplog.records == []  # random search breeds no child at any length


def test_sigterm_stops_a_search_as_ctrl_c_does_and_the_handlers_are_put_back(capsys):
    import signal

    from experiments.search.stop_signals import stop_on_interrupt

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with stop_on_interrupt() as interrupted:
        handler = signal.getsignal(signal.SIGTERM)  # not Ray's C++ one, which prints a stack trace and dies
        assert handler is signal.getsignal(signal.SIGINT) and callable(handler)
        handler(signal.SIGTERM, None)
        assert interrupted.is_set()
        assert capsys.readouterr().out == ("terminated (SIGTERM): stopping the running trials (a second signal ends "
                                           "it at once); run the same command again to resume\n")
        with pytest.raises(KeyboardInterrupt):
            handler(signal.SIGTERM, None)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_stopped_search_whose_ray_died_with_the_signal_ends_at_once_with_its_line(capsys):
    import signal
    import threading

    from experiments.search.stop_signals import stop_on_interrupt

    ray_dead, ended = threading.Event(), threading.Event()
    exits: list[int] = []

    def end(code: int) -> None:
        exits.append(code)
        ended.set()

    with stop_on_interrupt(ray_gone=ray_dead.is_set, last_words=lambda: "interrupted with 1 trials in flight",
                           end=end, check_every_s=0.01):
        time_to_notice = threading.Event()
        time_to_notice.wait(0.05)
        assert not ended.is_set()  # no signal: nothing watched
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # a scheduler's SIGTERM to every process of the job
        time_to_notice.wait(0.05)
        assert not ended.is_set()  # Ray still up: the search stops its trials itself
        ray_dead.set()
        assert ended.wait(5) and exits == [1]
    assert capsys.readouterr().err == "interrupted with 1 trials in flight\n"

    ended.clear()
    ray_dead.clear()
    with stop_on_interrupt(ray_gone=ray_dead.is_set, last_words=lambda: "x", end=end, check_every_s=0.01):
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
    ray_dead.set()  # the search ended as it does, then shut its Ray down: not a death to end on
    assert not ended.wait(0.1) and capsys.readouterr().err == ""


def test_the_proxys_old_flag_names_still_work_with_a_warning(tmp_path, capsys):
    from absl import flags

    from experiments.commands.search import config_from_flags, define_search_flags

    values = flags.FlagValues()
    settings = define_search_flags(values)
    values(["amoeba", f"--output_dir={tmp_path}", "--batch_size=32", "--warmup_epochs=0.5", "--label_smoothing=0.1"])
    config = config_from_flags(values, settings)
    assert (config.proxy.train_batch_size, config.proxy.lr_warmup_epochs, config.proxy.label_smoothing) == (32, 0.5, 0.1)
    assert "--batch_size is deprecated; use --train_batch_size" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(os.path.join(REPO, "experiments", "configs"))
                                        if n.startswith("search_") and n.endswith(".cfg")))
def test_every_search_config_is_a_valid_search(name, monkeypatch, tmp_path):
    from absl import flags

    from experiments.commands.search import config_from_flags, define_search_flags

    monkeypatch.chdir(REPO)  # the configs name their seed genotypes from the repository's root
    values = flags.FlagValues()
    settings = define_search_flags(values)
    flagfile = os.path.join("experiments", "configs", name)
    data = ["--data=data/cifar10"] if "--data=" in open(flagfile).read() else []  # its usage line asks for one
    values(["amoeba", f"--flagfile={flagfile}", f"--output_dir={tmp_path}", *data])
    config = config_from_flags(values, settings)
    space = config.search_space()
    for genotype in config.initial:
        space.genotype_from_json(genotype)  # each seed is a genotype of the space it searches
