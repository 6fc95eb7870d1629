"""The calibration before a sized search (experiments/search/calibration.py): airbench94 trained once by the
proxy on the user's data sets the target and the limits, timed on the candidates' clock, stands in
for the search's trial 0, is retried when it failed, and warns of a target inside the noise."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from experiments.search import sizing


def test_a_failed_calibration_says_what_failed_and_what_to_do_and_a_rerun_trains_it_again(tmp_path, monkeypatch,
                                                                                          capsys):
    """A calibration whose run failed (recorded in DIR/calibration's journal) once blocked every
    rerun with a message naming --target_accuracy alone (which needs --target_seconds too)."""
    from absl import flags

    from experiments.search import calibration
    from experiments.commands.search import config_from_flags, define_search_flags, given_settings

    data = tmp_path / "data"
    data.mkdir()
    (data / "metadata.json").write_text(json.dumps({"num_train_images": 1_000_000, "num_label_classes": 10}))
    values = flags.FlagValues()
    settings = define_search_flags(values)
    values(["amoeba", f"--output_dir={tmp_path / 'search'}", f"--data={data}"])
    config, given = config_from_flags(values, settings), given_settings(values, settings)

    def run(**result):
        def run_search(probe, algorithm):  # the calibration trial, told as a worker would tell it
            algorithm.tell(algorithm.ask().trial_id, **result)
            algorithm.close()
            return algorithm
        return run_search

    monkeypatch.setattr(calibration, "run_search", run(error="ResourceExhaustedError: OOM when allocating"))
    with pytest.raises(ValueError) as failed:
        calibration.calibrate(config, given)
    where = str(tmp_path / "search" / "calibration")
    for words in (f"calibration ({where}): airbench94", "failed: ResourceExhaustedError: OOM when allocating",
                  "run the same command again", f"delete {where}", "--target_accuracy and --target_seconds"):
        assert words in str(failed.value)
    monkeypatch.setattr(calibration, "run_search", run(metrics={"val_accuracy": 0.8, "trial_seconds": 230.0}))
    sized = calibration.calibrate(config, given)  # the rerun trains it again
    assert (sized.proxy.target_accuracy, sized.proxy.target_seconds, sized.max_trials) == (0.76, 345.0, 60)
    assert sized.time_budget_s == 1270.0  # the 1,500 s less the calibration's 230 s (issue 55)
    printed = capsys.readouterr().out
    assert "calibration: airbench94 reached 0.8000 validation accuracy in 230 s" in printed
    assert "amoeba promote afterwards (not in the search's time): 6 models x 9.9 epochs of 998,000 images, " \
           "about 2.0 days" in printed  # the search's hour covers the search only
    monkeypatch.setattr(calibration, "run_search", None)  # a rerun after: read back, nothing trained
    assert calibration.calibrate(config, given) == sized


def _sized_config(tmp_path, images: int = 1_000_000, classes: int = 10, *given: str):
    """The config `amoeba search --output_dir=DIR/search --data=DIR/data` builds on a dir of
    `images` training images of `classes` classes, and the settings given."""
    from absl import flags

    from experiments.commands.search import config_from_flags, define_search_flags, given_settings

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "metadata.json").write_text(json.dumps({"num_train_images": images, "num_label_classes": classes}))
    values = flags.FlagValues()
    settings = define_search_flags(values)
    values(["amoeba", f"--output_dir={tmp_path / 'search'}", f"--data={data}", *given])
    return config_from_flags(values, settings), given_settings(values, settings)


CURVE = [[30.0, 0.5], [60.0, 0.7], [90.0, 0.78], [120.0, 0.81], [150.0, 0.80]]  # 5 epochs, evaluated after each
CALIBRATED = {"val_accuracy": 0.80, "val_loss": 0.6, "train_loss": 0.7, "train_seconds": 140.0, "trial_seconds": 190.0,
              "validation_images": 2_000, "target_curve": CURVE, "best_val_accuracy": 0.81, "evaluations": 5,
              "train_steps": 200, "epochs": 5.0, "params": 1_000, "step_ms": 10.0, "error": ""}


def _calibrating(monkeypatch, metrics: dict):
    """calibration.run_search standing in for the calibration's trial: told `metrics`; the probes it
    was given."""
    from experiments.search import calibration

    probes = []

    def run_search(probe, algorithm):
        probes.append(probe)
        algorithm.tell(algorithm.ask().trial_id, metrics)
        algorithm.close()
        return algorithm

    monkeypatch.setattr(calibration, "run_search", run_search)
    return probes


def test_the_calibration_is_timed_on_the_candidates_clock_with_their_evaluations(tmp_path, monkeypatch, capsys):
    """Issue 52: target_seconds came from the calibration's whole trial (TensorFlow's import, the
    decoding, the build and the latency measure, which no candidate's clock counts) of a run that
    skipped the per-epoch evaluations every candidate pays for. Now the calibration's run is
    evaluated and timed as a candidate's: the limit is its clock's end, the length its trial's."""
    from experiments.search import calibration

    config, given = _sized_config(tmp_path)
    probes = _calibrating(monkeypatch, CALIBRATED)
    sized = calibration.calibrate(config, given)
    probe = probes[0].proxy
    assert probe.calibration and probe.epochs_per_eval == config.proxy.epochs_per_eval == 1.0  # every epoch
    assert (probe.target_clock, probe.target_accuracy, probe.timeout_s) == (config.proxy.target_clock, 0.0, 0.0)
    assert (sized.proxy.target_accuracy, sized.proxy.target_seconds, sized.proxy.timeout_s) == (0.76, 225.0, 450.0)
    assert (sized.max_trials, sized.time_budget_s) == (60, 1310.0)  # 1,500 s less the whole trial's 190 s
    printed = capsys.readouterr().out
    assert ("calibration: airbench94 reached 0.8000 validation accuracy in 150 s (training and evaluations, the "
            "candidates' clock; 190 s the whole trial) on this data; candidates race to 0.7600 (at most 225 s each); "
            "up to 60 trials, the first this run (not trained again), 59 more, none handed out after 22 min "
            "(--time_budget_s; a candidate that cannot win stops early)") in printed
    steady, given = _sized_config(tmp_path, 1_000_000, 10, "--target_clock=steady")
    assert calibration.calibration_config(steady).proxy.target_clock == "steady"  # the candidates' clock


def test_a_calibration_made_before_it_was_so_timed_resumes_as_it_was_made(tmp_path, monkeypatch, capsys):
    from experiments.search import calibration

    config, given = _sized_config(tmp_path)
    _calibrating(monkeypatch, {"val_accuracy": 0.8, "trial_seconds": 230.0})
    before = calibration.calibration_config(config, made_before=True)
    calibration._calibration_metrics(before)  # trained as it was: no curve, no `calibration` in its proxy
    saved = json.loads((tmp_path / "search" / "calibration" / "search_config.json").read_text())
    del saved["proxy"]["calibration"]
    (tmp_path / "search" / "calibration" / "search_config.json").write_text(json.dumps(saved))
    assert calibration.made_before(config.output_dir)
    monkeypatch.setattr(calibration, "run_search", None)  # read back, not trained again
    sized = calibration.calibrate(config, given)
    assert (sized.proxy.target_seconds, sized.max_trials) == (345.0, 60)  # its whole trial's seconds, as then
    assert "in 230 s on this data; candidates race to 0.7600 (at most 345 s each); up to 60 trials, none handed " \
        "out after 21 min" in capsys.readouterr().out
    assert calibration.made_before(config.output_dir)  # the resume saved `calibration: false`: still as made
    assert calibration.calibrate(config, given).proxy.target_seconds == 345.0  # and a third run resumes it too


def test_the_calibrations_run_is_the_searchs_trial_0_scored_at_its_target_and_replayed(tmp_path, monkeypatch,
                                                                                       capsys):
    """Issue 52: the sized search trained airbench94 twice, once to calibrate and again as its trial
    0, the same network with the same recipe and seed. Trial 0 is now journaled with the
    calibration's result, scored at the target from its curve as if it had stopped at its hit; the
    first population's repeats reuse it; a resume replays it and seeds nothing again."""
    from evolution import resume
    from experiments.search import calibration
    from experiments.search.output_dir import open_search

    # the children screened by the additive model: the step's timer builds them, on data this dir lacks
    config, given = _sized_config(tmp_path, 1_000_000, 10, "--screen_score=surrogate")
    _calibrating(monkeypatch, CALIBRATED)
    sized = calibration.calibrate(config, given)
    algorithm = open_search(sized)
    assert calibration.seed_first_trial(sized, algorithm)
    trial0 = algorithm.outcomes[0]
    assert algorithm.trials[0].mutation == "initial" and trial0.status == "ok" and trial0.reused_from is None
    metrics = trial0.metrics  # the target 0.76: reached at the third evaluation, 90 s; stopped there
    assert (metrics["seconds_to_target"], metrics["time_to_target_s"], metrics["target_curve"]) == (90.0, 90.0,
                                                                                                      CURVE[:3])
    assert (metrics["val_accuracy"], metrics["best_val_accuracy"], metrics["evaluations"]) == (0.78, 0.78, 3)
    assert (metrics["train_steps"], metrics["epochs"], metrics["seeded_from"]) == (120, 3.0, "calibration")
    assert "val_loss" not in metrics and metrics["params"] == 1_000  # its end's loss dropped; its costs kept
    assert algorithm.completed() == 1  # one of max_trials: the search's trial 0
    child = algorithm.ask()  # the first population's other five airbench94s take its result: a child next
    assert child.trial_id == 6 and [algorithm.outcomes[t].reused_from for t in range(1, 6)] == [0] * 5
    algorithm.close()
    printed = capsys.readouterr().out
    assert "trial 0 (airbench94) is the calibration's run" in printed
    assert "[1/60] trial 0 (initial): seconds_to_target 90.0000" in printed
    again = open_search(sized)  # a rerun: replayed to the same state, nothing seeded twice
    assert again.outcomes[0] == trial0 and again.outcomes[5].reused_from == 0 and again.pending() == [6]
    assert not calibration.seed_first_trial(sized, again)
    again.close()
    journal = resume(f"{sized.output_dir}/journal.jsonl", read_only=True)
    assert [o.metrics for o in journal.outcomes.values()] == [o.metrics for o in again.outcomes.values()]


def test_a_search_that_ended_between_asking_trial_0_and_its_result_is_seeded_on_resume(tmp_path, monkeypatch):
    from experiments.search import calibration
    from experiments.search.output_dir import open_search

    # the children screened by the additive model: the step's timer builds them, on data this dir lacks
    config, given = _sized_config(tmp_path, 1_000_000, 10, "--screen_score=surrogate")
    _calibrating(monkeypatch, CALIBRATED)
    sized = calibration.calibrate(config, given)
    algorithm = open_search(sized)
    assert algorithm.ask().trial_id == 0  # then the driver died
    algorithm.close()
    resumed = open_search(sized)
    assert resumed.pending() == [0] and calibration.seed_first_trial(sized, resumed)
    assert resumed.outcomes[0].metrics["seconds_to_target"] == 90.0 and not resumed.waiting_reissue()
    resumed.close()


def test_trial_0_is_trained_when_the_calibration_cannot_stand_in_for_it(tmp_path, monkeypatch):
    from experiments.search import calibration
    from experiments.search.output_dir import open_search

    config, given = _sized_config(tmp_path, 1_000_000, 10, "--initial=resnet9")  # another first network
    _calibrating(monkeypatch, CALIBRATED)
    sized = calibration.calibrate(config, given)
    algorithm = open_search(sized)
    assert not calibration.seed_first_trial(sized, algorithm) and not algorithm.trials
    algorithm.close()


@pytest.mark.parametrize("limit, seconds, hit", [(225.0, 90.0, 90.0), (50.0, 50.0 * 1.06, None)])
def test_trial_0s_result_is_what_the_trial_would_have_scored(limit, seconds, hit):
    """Scored from the curve up to where a candidate stops: its hit, or its limit spent (a miss
    scored on what it had reached by then)."""
    from experiments.search.calibration import first_trial_metrics
    from core.proxy_config import ProxyConfig

    proxy = ProxyConfig(target_accuracy=0.76, target_seconds=limit, epochs_per_eval=1.0)
    metrics = first_trial_metrics(proxy, CALIBRATED)
    assert metrics["seconds_to_target"] == pytest.approx(seconds) and metrics["time_to_target_s"] == hit
    if hit is None:  # stopped at its 60 s evaluation, past the 50 s: 0.7 at best by then, 0.06 short
        assert metrics["target_curve"] == CURVE[:2] and metrics["best_val_accuracy"] == 0.7
    assert first_trial_metrics(proxy, {"val_accuracy": 0.8, "trial_seconds": 230.0}) is None  # no curve: trained


def test_a_target_inside_the_validation_splits_noise_is_warned_of(tmp_path, monkeypatch, capsys):
    """Issue 52: on 2 classes and 10 held-out images, chance is 0.5 and Wilson's 95% half-width at
    the target about 0.24: a net that guesses hits a target near chance at its first evaluation, so
    candidates rank by the time to it, by speed alone; the calibration says so."""
    from experiments.search import calibration
    from core.proxy_config import ProxyConfig

    assert sizing.wilson_half_width(0.76, 10) == pytest.approx(0.2363, abs=1e-4)
    assert sizing.wilson_half_width(0.76, 2_000) == pytest.approx(0.0187, abs=1e-4)
    near_chance = ProxyConfig(target_accuracy=round(0.95 * 0.6, 4), target_seconds=100.0)  # 0.57
    # a net that guesses gets 6 of the 10 right (0.6, over the target) 38% of the time at each evaluation
    assert sum(math.comb(10, k) for k in range(6, 11)) / 2 ** 10 == pytest.approx(0.377, abs=1e-3)
    guessing, learning = [[5.0, 0.6], [10.0, 0.5]], [[8.0, 0.9], [16.0, 1.0]]
    scores = [near_chance.seconds_to_target_on(c)["seconds_to_target"] for c in (guessing, learning)]
    assert scores == [5.0, 8.0]  # both hit at their first evaluation: the faster to one ranks first
    line = sizing.target_warning(0.57, 0.6, 2, 10)
    assert line.startswith("warning: the target 0.5700 is inside the validation split's noise: 10 held-out images "
                           "measure it to +/-0.2615 (Wilson 95% half-width), chance (1/2 classes) is 0.5000")
    assert "within it of chance" in line and "within it of airbench94's own 0.6000" in line
    assert "speed alone" in line and "--validation_images" in line
    assert "within it of chance" not in sizing.target_warning(0.76, 0.8, 2, 10)  # 0.26 over chance: the seed's
    assert sizing.target_warning(0.76, 0.8, 10, 2_000) is None  # CIFAR-10's proxy: clear of both
    config, given = _sized_config(tmp_path, 50, 2)  # 10 held out of 50 photos of 2 classes
    _calibrating(monkeypatch, {**CALIBRATED, "val_accuracy": 0.6, "validation_images": 10})
    calibration.calibrate(config, given)
    assert "warning: the target 0.5700 is inside the validation split's noise: 10 held-out images" in \
        capsys.readouterr().out


def test_the_calibrations_proxy_setting_is_no_flag_and_a_search_saved_before_it_resumes(tmp_path):
    """ProxyConfig.calibration (issue 52) is set by experiments/search/calibration.py alone: no flag; a
    search saved before it existed resumes, and a calibration is not resumed as a search."""
    from experiments.commands import search
    from experiments.search.driver import SearchConfig, open_search

    assert "calibration" not in search.FLAGS
    config = SearchConfig(output_dir=str(tmp_path), max_trials=2, population_size=2, sample_size=2)
    open_search(config).close()
    saved = json.loads((tmp_path / "search_config.json").read_text())
    del saved["proxy"]["calibration"]  # as a search saved before it
    (tmp_path / "search_config.json").write_text(json.dumps(saved))
    open_search(config).close()
    with pytest.raises(ValueError, match="proxy calibration: False before, True now"):
        open_search(dataclasses.replace(config, proxy=dataclasses.replace(config.proxy, calibration=True)))
