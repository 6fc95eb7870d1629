"""A search's Ray side without accelerators or a second machine: fake GPU/TPU resources, a
three-node Ray cluster on this machine (Ray's own cluster_utils) that loses a node mid-search, and
the loopback-only Ray a search starts for itself. Trials only sleep (experiments.search.trial.sleep_trial):
what is tested is Ray, Tune, the searcher and the journal."""

import glob
import os
import subprocess
import sys
import threading
import time

import pytest
import ray
from ray import tune
from ray._private import ray_constants

from evolution import resume
from experiments.search.local_ray import init_ray
from experiments.search.driver import SearchConfig, open_search, run_search
from experiments.search.trial import sleep_trial
from tests.conftest import REPO, amoeba_here


def _search(out: str, seconds: float, **settings) -> tuple[list[dict], float]:
    config = SearchConfig(output_dir=out, population_size=4, sample_size=2, **settings)
    t0 = time.time()
    run_search(config, open_search(config), trainable=tune.with_parameters(sleep_trial, seconds=seconds))
    algorithm = resume(os.path.join(out, "journal.jsonl"), read_only=True)
    assert algorithm.completed() == config.max_trials and not algorithm.pending()
    assert {o.status for o in algorithm.outcomes.values()} == {"ok"}
    return [o.metrics for o in algorithm.outcomes.values()], t0


def _overlapping(trials: list[dict]) -> list[list[dict]]:
    """For each trial, the trials running as it started (itself included): the largest of these
    groups is the most that ran at once, however staggered their starts on a busy machine."""
    groups = []
    for trial in trials:
        start = trial["trial_started_at"]
        groups.append([t for t in trials if t["trial_started_at"] <= start <= t["trial_started_at"] + t["trial_seconds"]])
    return groups


@pytest.mark.integration
def test_concurrency_follows_fake_gpus_and_tpus_and_each_trial_sees_its_own(tmp_path, monkeypatch, own_ray):
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1")  # restored after: init_ray changes both
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    init_ray(None, num_cpus=2, num_gpus=2, resources={"TPU": 4})
    try:
        # trials long enough to overlap however staggered their workers' starts on a busy machine
        gpu_trials, _ = _search(str(tmp_path / "gpus"), 5.0, max_trials=8, gpus_per_trial=0.5)
        tpu_trials, _ = _search(str(tmp_path / "tpus"), 5.0, max_trials=4, tpus_per_trial=2)
    finally:
        ray.shutdown()
    # 2 GPUs at half a GPU each: 4 trials at once, on CPUs shared 0.5 each; two per GPU
    assert max(len(group) for group in _overlapping(gpu_trials)) == 4
    for group in _overlapping(gpu_trials):
        ids = [t["gpu_ids"] for t in group]
        assert all(ids.count(i) <= 2 for i in ids)
    assert all(t["gpu_ids"] in ("0", "1") and t["cuda_visible_devices"] == t["gpu_ids"] for t in gpu_trials)
    # 4 TPU chips at 2 each: 2 trials at once, on chips of their own
    assert max(len(group) for group in _overlapping(tpu_trials)) == 2
    for group in _overlapping(tpu_trials):
        chips = [c for t in group for c in t["tpu_ids"].split(",")]
        assert len(chips) == len(set(chips)) == 2 * len(group)
    assert all(t["tpu_visible_chips"] == t["tpu_ids"] for t in tpu_trials)


@pytest.mark.integration
def test_a_long_search_runs_as_several_tune_experiments_on_one_journal(tmp_path, shared_ray):
    trials, _ = _search(str(tmp_path / "parts"), 0.1, max_trials=7, max_concurrent=2, trials_per_tuner=3)
    assert len(trials) == 7  # all told once, by 3 experiments of 3, 3 and 1 trials
    assert len(glob.glob(str(tmp_path / "parts" / "tune" / "tune-*"))) == 3
    algorithm = resume(str(tmp_path / "parts" / "journal.jsonl"), read_only=True)
    assert sum(t.parent_id is not None for t in algorithm.trials.values()) >= 1  # evolution went on across parts


@pytest.mark.integration
def test_a_multi_fidelity_search_spreads_over_a_cluster_and_survives_losing_a_node(tmp_path, own_ray):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # trials run on the workers
    workers = [cluster.add_node(num_cpus=2) for _ in range(2)]
    cluster.wait_for_nodes()
    out = str(tmp_path / "cluster")
    journal = os.path.join(out, "journal.jsonl")
    removed: dict[str, object] = {}

    def remove_a_node_mid_search() -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            if os.path.exists(journal) and open(journal).read().count('"event":"tell"') >= 4:
                told = resume(journal, read_only=True).outcomes.values()
                removed["told_before"] = {o.metrics["node_id"] for o in told}
                if len(removed["told_before"]) < 2:  # a node whose workers started late (a busy machine)
                    time.sleep(0.5)
                    continue
                cluster.remove_node(workers[1])
                removed["node"] = workers[1].node_id
                return
            time.sleep(0.1)

    killer = threading.Thread(target=remove_a_node_mid_search, daemon=True)
    killer.start()
    try:
        # max_failures=4: Tune may spend a retry on a warm actor of the lost node before it knows the
        # node is gone (seen in 2 of 9 runs with the default 2, this code and the code before it)
        trials, _ = _search(out, 3.0, max_trials=12, cpus_per_trial=1, ray_address=cluster.address,
                            rungs=(1, 2), reduction_factor=2, max_failures=4)  # multi-fidelity on a cluster
    finally:
        killer.join(timeout=5)
        cluster.shutdown()
    assert removed.get("node"), "the node was not removed mid-search"
    assert removed["told_before"] == {w.node_id for w in workers}  # spread over both worker nodes
    # The trials in flight on the lost node ran again on the other: Tune logged their lost worker,
    # the journal holds 12 good results and no failure (checked in _search).
    errors = glob.glob(os.path.join(out, "tune", "*", "*", "error.txt"))
    assert errors and "node has died" in open(errors[0]).read()
    assert trials[-1]["node_id"] == workers[0].node_id
    algorithm = resume(journal, read_only=True)  # rung decisions replay (a retried trial's repeat is not one)
    assert {m["rung"] for m in trials} == {0, 1}
    assert all(len(algorithm.decisions[t]) == o.metrics["rung"] + 1 for t, o in algorithm.outcomes.items())


@pytest.mark.integration  # a Ray of its own, in a fresh process
def test_a_local_ray_listens_on_loopback_only_starts_no_idle_workers_and_says_nothing_of_tokens():
    script = ("import time, ray; from experiments.search.local_ray import init_ray; from tests.search.test_search_cluster import "
              "listening_addresses, idle_workers; init_ray(None, num_cpus=1); time.sleep(3); "
              "print(idle_workers()); ray.get(ray.remote(lambda: 1).remote()); "
              "print(ray.nodes()[0]['NodeManagerAddress']); print(sorted(listening_addresses())); ray.shutdown()")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    idle, node, addresses = result.stdout.splitlines()[-3:]
    assert idle == "0"  # none started for the driver (Ray's default starts num_cpus of them within 3 s)
    assert node == "127.0.0.1"
    addresses = eval(addresses, {})  # noqa: S307 - our own printout of a list of strings
    assert len(addresses) >= 3 and set(addresses) <= {"127.0.0.1", "::ffff:127.0.0.1"}, addresses
    assert "token" not in (result.stdout + result.stderr).lower()


def _descendants() -> set[int]:
    """This process and its descendants (Linux)."""
    parents = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
            parents[int(stat.split("/")[2])] = int(fields[1])
        except (OSError, IndexError, ValueError):
            pass
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in mine} - mine
        mine |= more
        grew = bool(more)
    return mine


def idle_workers() -> int:
    """How many idle Ray worker processes (titled ray::IDLE) run below this process."""
    count = 0
    for pid in _descendants():
        try:
            count += open(f"/proc/{pid}/cmdline").read().startswith("ray::IDLE")
        except OSError:
            pass
    return count


def listening_addresses() -> list[str]:
    """Local addresses of the TCP sockets listening in this process and its descendants (Linux)."""
    inodes = set()
    for pid in _descendants():
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    addresses = []
    for table, ipv6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                addresses.append(_address(fields[1].split(":")[0], ipv6))
    return addresses


def _address(hex_ip: str, ipv6: bool) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_ip)
    if not ipv6:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return f"::ffff:{address.ipv4_mapped}" if address.ipv4_mapped else str(address)


@pytest.mark.integration  # the search driver asks Ray what the cluster has
def test_asking_for_accelerators_the_machine_lacks_is_a_config_error(tmp_path, shared_ray):
    result = amoeba_here("search", f"--output_dir={tmp_path / 's'}", "--max_trials=2", "--gpus_per_trial=1", check=False)
    assert result.returncode == 1
    assert "the Ray cluster has 0 GPU: not enough for one trial (1 GPU per trial)" in result.stderr
