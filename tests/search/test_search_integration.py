"""End to end through the `amoeba` command and real Ray Tune: a tiny search, then a resume.

Searches run in this process on the pytest worker's shared Ray (`amoeba_here`, `shared_ray`), one
trial at a time (a TensorFlow import less per Tune experiment), except where the test is about the
process itself (a second driver, SIGKILL; Ctrl-C is sent to this process) or about trials side by
side (the first test)."""

import glob
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time

import pandas as pd
import pytest

from evolution import resume
from searchspace import MacroGenotype, NasNetGenotype, NasNetSpace
from tests.conftest import AMOEBA, QUIET_TF, amoeba_here, wait_for_text

TINY_SEARCH = ["--space=nasnet", "--max_concurrent=1", "--population_size=3", "--sample_size=2", "--epochs=1",
               "--filters=4", "--num_blocks=2", "--train_batch_size=64"]


@pytest.mark.integration
def test_a_search_of_prepared_jpegs_through_ray_tune_with_rungs_then_resume(cifar_mini, tmp_path, shared_ray,
                                                                           gcs_emulator, monkeypatch):
    """amoeba prepare (the fixture), then amoeba search --data at 16 px with rungs, two trials at once,
    seeded, uploading to GCS and logging to MLflow; then resumed."""
    from core import storage
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow-skinny has no database store
    tracking = f"file://{tmp_path / 'mlruns'}"

    _, data = cifar_mini
    out, dest = str(tmp_path / "search"), f"{gcs_emulator}/searches/one"
    seed = NasNetSpace(num_blocks=2).sample(random.Random(5))  # a cell of an earlier search, as its best_genotype.json
    (tmp_path / "best_genotype.json").write_text(json.dumps({"trial_id": 3, "genotype": seed.to_json()}))
    tiny = [*TINY_SEARCH, "--max_concurrent=2", f"--initial={tmp_path / 'best_genotype.json'}",  # the last wins
            f"--data={data}", "--image_size=16", "--validation_images=100", "--train_images=256", "--rungs=1,2",
            "--reduction_factor=2"]
    result = amoeba_here("search", f"--output_dir={out}", "--max_trials=5", *tiny, f"--upload_to={dest}",
                         f"--mlflow_tracking_uri={tracking}")
    assert "5 trials done (0 failed)" in result.stdout and "top 5:" in result.stdout
    config = json.load(open(os.path.join(out, "search_config.json")))["proxy"]
    assert (config["dataset"], config["data"], config["image_size"]) == ("prepared", data, 16)
    told = resume(os.path.join(out, "journal.jsonl"), read_only=True).outcomes.values()
    assert {(o.metrics["validation_images"], o.metrics["train_images"]) for o in told} == {(100, 256)}
    assert {o.metrics["epochs"] for o in told} <= {1, 2} and "trial 0 at rung 0 (1 epochs)" in result.stdout
    assert "could not upload" not in result.stdout  # results kept up to date on GCS:
    for name in ("journal.jsonl", "search_config.json", "results.csv", "best_genotype.json"):
        assert storage.read_bytes(storage.join(dest, name)) == open(os.path.join(out, name), "rb").read()
    assert "[progress" in result.stdout and "5/5 done (0 failed), 0 running, 0 left" in result.stdout

    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert list(table.trial_id) == list(range(5)) and set(table.status) == {"ok"}
    assert table.val_accuracy.between(0, 1).all() and (table.params > 0).all()
    assert table.parent_id.notna().sum() >= 1  # evolution mutated after P=3 results (trial 4 at the latest)
    assert table.mutation[0] == "initial" and table.key[0] == seed.key() and "trial 0 (initial)" in result.stdout
    algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    pids = [o.metrics["worker_pid"] for o in algorithm.outcomes.values()]
    assert len(set(pids)) < 5  # warm workers: Tune reused them for later trials
    warm = [o.metrics for o in algorithm.outcomes.values() if o.metrics["worker_trial"] > 1]
    assert warm and all(m["import_seconds"] < 0.5 for m in warm)  # TensorFlow already imported

    best = json.load(open(os.path.join(out, "best_genotype.json")))
    picked, outcome = algorithm.best()  # the pick compares cells like with like, rung by rung
    assert best["trial_id"] == picked.trial_id and best["value"] == outcome.metrics["val_accuracy"]
    assert best["value"] == table.set_index("trial_id").val_accuracy[picked.trial_id]
    NasNetGenotype.from_json(best["genotype"])
    assert "h2 = " in amoeba_here("show", os.path.join(out, "best_genotype.json")).stdout

    # Same output dir, larger budget: resumes and runs only the new trial.
    result = amoeba_here("search", f"--output_dir={out}", "--max_trials=6", *tiny, f"--mlflow_tracking_uri={tracking}")
    assert "6 trials done" in result.stdout
    assert "could not log to MLflow" not in result.stdout
    _each_trial_logged_once(tracking, out, table.val_accuracy[0], trials=6)
    assert "resumed" in result.stderr and "5 trials done, 0 to re-issue" in result.stderr  # log.info reaches users
    assert len(pd.read_csv(os.path.join(out, "results.csv"))) == 6
    assert "6/6 done (0 failed)" in amoeba_here("results", out).stdout

    # A different proxy in the same output dir is a config error, before any trial runs.
    result = amoeba_here("search", f"--output_dir={out}", "--max_trials=8", *tiny, "--epochs=2", check=False)
    assert result.returncode != 0 and "proxy epochs: 1 before, 2 now" in result.stderr
    assert len(resume(os.path.join(out, "journal.jsonl"), read_only=True).trials) == 6


def _each_trial_logged_once(tracking: str, out: str, first_accuracy: float, trials: int) -> None:
    """MLflow and TensorBoard's HParams hold each trial once, resumed or not, with its metrics (ours:
    Ray Tune's own TensorBoard logger, which would add one under OUTPUT_DIR/tune, is off)."""
    from tests.tracking.test_hparams import hparams_sessions
    from tests.tracking.test_mlflow import logged_runs

    runs = logged_runs(tracking, os.path.basename(out))
    assert sorted(runs) == [f"trial_{i}" for i in range(trials)]
    assert runs["trial_0"]["metrics"]["val_accuracy"] == first_accuracy
    assert sorted(os.listdir(os.path.join(out, "hparams"))) == [f"trial_{i}" for i in range(trials)]
    assert hparams_sessions(out) == [f"hparams/trial_{i}" for i in range(trials)]
    assert not glob.glob(os.path.join(out, "tune", "**", "*tfevents*"), recursive=True)


@pytest.mark.integration
def test_limits_reject_big_children_and_record_slow_ones_infeasible_without_tripping_the_breaker(tmp_path,
                                                                                                  shared_ray):
    """A Pareto search under a size limit (judged by building each child in a Ray worker, before any
    training) and a latency limit no cell meets (judged by each trial on its own device): every
    trial is infeasible, untrained, and the breaker (1 failure) does not trip."""
    out = str(tmp_path / "limited")
    result = amoeba_here("search", f"--output_dir={out}", "--max_trials=4", *TINY_SEARCH, "--algorithm=pareto_evolution",
                    "--objectives=val_accuracy:max,latency_ms:min", "--max_params=8000", "--max_latency_ms=0.001",
                    "--max_consecutive_failures=1")
    assert "4 trials done (0 failed, 4 infeasible)" in result.stdout and "rejected untrained" in result.stdout
    assert "INFEASIBLE (latency_ms" in result.stdout and "no trial succeeded" in result.stdout
    assert not os.path.exists(os.path.join(out, "best_genotype.json"))
    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert set(table.status) == {"infeasible"} and (table.params <= 8000).all() and (table.latency_ms > 0).all()
    assert table.train_seconds.isna().all()  # measured, never trained
    with open(os.path.join(out, "journal.jsonl")) as f:
        rejects = [e for e in map(json.loads, f) if e["event"] == "reject"]
    assert rejects and all(e["figures"]["params"] > 8000 for e in rejects)
    shown = amoeba_here("results", out, "--top=0").stdout
    assert "4/4 done (0 failed, 4 infeasible)" in shown and shown.count(" infeasible ") == 4


def test_config_errors_fail_at_once_without_a_journal(tmp_path):
    out = str(tmp_path / "bad")
    for flags, message in [
        (["--population_size=4", "--sample_size=9"], "sample_size"),
        ([f"--data={tmp_path}"], f"{tmp_path}: no metadata.json; make the dir with `amoeba prepare`"),
        ([f"--data={tmp_path}", "--dataset=digits"], "is built in and reads no --data dir"),
        (["--initial=amoebanet_a", "--num_blocks=2"],
         "initial[0]: not a genotype of the nasnet space: normal cell: 5 blocks, this space's cells have 2"),
        (["--rungs=1,x"], "rungs: ['1', 'x'] are not whole numbers"),
        (["--initial=amoebanet_z"], "initial: 'amoebanet_z': neither a reference name (airbench94, airbench94_relu, "
                                    "amoebanet_a, amoebanet_d, nasnet_a, resnet9)"),
        (["--upload_to=/tmp/not-gcs"], "upload_to: must be a gs://"),
    ]:
        result = amoeba_here("search", f"--output_dir={out}", *flags, check=False)
        assert result.returncode != 0 and message in result.stderr
        assert not os.path.exists(os.path.join(out, "journal.jsonl"))


@pytest.mark.integration
def test_a_data_dir_broken_after_the_start_stops_the_search_with_its_error(cifar_mini, tmp_path, shared_ray):
    """Its metadata still checks out, so the driver starts; every worker then fails to read the
    images. Each failure is recorded with the exception, and the breaker stops the search."""
    _, data = cifar_mini
    broken = str(tmp_path / "broken")
    shutil.copytree(data, broken)
    for shard in glob.glob(os.path.join(broken, "train-*")):
        with open(shard, "r+b") as f:
            f.truncate(100)
    out = str(tmp_path / "search")
    result = amoeba_here("search", f"--output_dir={out}", f"--data={broken}", "--max_trials=6", "--image_size=16",
                    "--validation_images=100", "--train_images=256", "--max_consecutive_failures=2", *TINY_SEARCH,
                    check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stopped: 2 candidates failed in a row" in result.stderr and "DataLossError" in result.stderr
    told = resume(os.path.join(out, "journal.jsonl"), read_only=True).outcomes.values()
    assert len(told) == 2 and all(o.error.startswith("DataLossError: ") for o in told)


@pytest.mark.integration
def test_a_hung_candidate_fails_as_a_timeout_and_the_breaker_stops_the_search_until_fixed(tmp_path, shared_ray):
    out = str(tmp_path / "hangs")
    # The watchdog ends the worker at once (no grace past a 1 ms limit): Tune retries the trial,
    # which reports the timeout its watchdog wrote down instead of hanging again.
    halted = amoeba_here("search", f"--output_dir={out}", "--max_trials=6", *TINY_SEARCH, "--trial_timeout_s=0.001",
                         "--hang_grace_s=0", "--max_consecutive_failures=1", check=False)  # counting: test_objectives
    assert halted.returncode == 1, halted.stdout + halted.stderr
    assert "stopped: a candidate failed (--max_consecutive_failures=1); the last: timeout: trial" \
        in halted.stderr and "still running after 0.001 s (hung)" in halted.stderr
    told = resume(os.path.join(out, "journal.jsonl"), read_only=True).outcomes.values()
    assert len(told) == 1 and all(o.error.startswith("timeout: trial") for o in told)
    from experiments.search.trial import FailureNotes

    assert not FailureNotes.left()  # the watchdog's notes went with their run

    fixed = amoeba_here("search", f"--output_dir={out}", "--max_trials=2", *TINY_SEARCH)  # resumes
    assert "2 trials done (1 failed)" in fixed.stdout


@pytest.mark.integration
def test_a_second_driver_is_refused_and_a_search_sigkilled_mid_rung_resumes(tmp_path, shared_ray):
    out = str(tmp_path / "killed")
    journal = os.path.join(out, "journal.jsonl")
    rungs = ["--rungs=1,2", "--reduction_factor=2", "--train_batch_size=32"]  # 44 steps an epoch: time to kill
    # seed 3: trial 1 goes on to rung 2 (trial 0 is stopped at rung 1), so the kill comes early
    macro = ["--space=nasnet_macro", "--ops=none,max_pool_3x3,conv_1x1,plain_conv_3x3"]  # the network searched too
    search = ["search", f"--output_dir={out}", "--max_trials=4", "--seed=3", *TINY_SEARCH, *rungs, *macro]
    proc = subprocess.Popen(AMOEBA + search, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=QUIET_TF)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not os.path.exists(journal):
        time.sleep(0.2)
    second = amoeba_here(*search, check=False)
    assert second.returncode == 1, second.stdout + second.stderr  # one driver per search
    assert f"another driver is running this search: {journal} is in use by another process (pid {proc.pid} on host" \
        in second.stderr
    wait_for_text(journal, '"decision":"continue"', proc, poll=0.05)  # a trial just set off for rung 2
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started
    proc.wait()
    before = resume(journal)
    in_flight = {t: before.trials[t] for t in before.pending()}
    mid_rung = [t for t in in_flight if before.decisions.get(t) == ["continue"]]
    assert before.completed() >= 1 and mid_rung, "kill came too late to leave a trial between its rungs"
    assert os.path.isdir(os.path.join(out, "checkpoints", f"trial_{mid_rung[0]}", "rung_0"))
    before.close()

    result = amoeba_here(*search)
    assert "4 trials done" in result.stdout
    after = resume(journal)
    assert after.completed() == 4 and not after.pending()
    for trial_id, trial in in_flight.items():  # re-issued: same id, same genotype, told once
        assert after.trials[trial_id] == trial and trial_id in after.outcomes
    for trial_id in mid_rung:  # its first rung was not trained again: it went on from its checkpoint
        second = after.rung_results[trial_id][1]  # (or its old worker, outliving the driver, finished it)
        assert second["restored_epochs"] == 1 or second.get("from_checkpoint"), second
        assert after.outcomes[trial_id].metrics["epochs"] == 2
    events = [json.loads(line)["event"] for line in open(journal)]
    assert events.count("reissue") == len(in_flight) and events.count("tell") == 4
    assert not os.listdir(os.path.join(out, "checkpoints"))  # a finished trial leaves none behind
    table = pd.read_csv(os.path.join(out, "results.csv"))
    assert set(table.rung) <= {0, 1} and set(table.epochs) <= {1, 2} and (table.epochs == 2).any()
    assert all(isinstance(t.genotype, MacroGenotype) for t in after.trials.values())  # resumed with the macro part
    assert table.genotype.str.startswith("cells=").all() and (table.params > 0).all()


@pytest.mark.integration
def test_ctrl_c_stops_the_search_with_its_trials_in_flight_left_to_a_rerun(tmp_path, shared_ray):
    out = str(tmp_path / "interrupted")
    journal = os.path.join(out, "journal.jsonl")
    searching = threading.Event()

    def ctrl_c_after_the_first_result() -> None:  # to this process, as a terminal sends it
        while searching.is_set():
            time.sleep(0.05)
            if os.path.exists(journal) and '"event":"tell"' in open(journal).read():
                os.kill(os.getpid(), signal.SIGINT)
                return

    searching.set()
    threading.Thread(target=ctrl_c_after_the_first_result, daemon=True).start()
    try:
        result = amoeba_here("search", f"--output_dir={out}", "--max_trials=40", *TINY_SEARCH, check=False)
    finally:
        searching.clear()
    output = result.stdout + result.stderr  # Tune's own handler would end one experiment and start the next
    assert result.returncode == 1 and "interrupted with" in output and "run the same command again" in output
    stopped = resume(journal, read_only=True)
    assert 1 <= stopped.completed() < 40


@pytest.mark.integration
def test_sigterm_to_the_process_group_ends_a_search_as_ctrl_c_does_resumable_and_without_rays_stack_trace(
        tmp_path):
    out = str(tmp_path / "terminated")
    journal = os.path.join(out, "journal.jsonl")
    proc = subprocess.Popen(AMOEBA + ["search", f"--output_dir={out}", "--max_trials=6", *TINY_SEARCH],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=QUIET_TF)
    try:
        wait_for_text(journal, '"event":"ask"', proc, poll=0.05)  # the first trial set off
        os.killpg(proc.pid, signal.SIGTERM)  # to its whole group, as `timeout` and `kill -TERM -PGID` send it:
        # Ray's processes (in sessions of their own) live on for the driver to stop its trials and end
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1 and "SIGTERM received" not in stdout + stderr, stdout + stderr
    assert stdout.startswith("terminated (SIGTERM): stopping the running trials"), stdout
    assert "interrupted with 1 trials in flight; run the same command again" in stderr
    assert resume(journal, read_only=True).pending() == [0]  # in flight, re-issued by a rerun
