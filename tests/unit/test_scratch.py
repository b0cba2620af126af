"""Node-local scratch folders: what a node removes, and when the sweep driver asks every node to."""

from __future__ import annotations

import pickle
import tempfile
from types import SimpleNamespace

import pytest

from ftplat.layout import build_train_run_uri, build_trial_result_uri
from ftplat.storage import write_json
from ftplat.train.scratch import build_scratch_dir, run_remove_scratch
from ftplat.tune import scratch as driver_scratch
from ftplat.tune.scratch import ScratchCleanupCallback


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_node_removes_only_the_named_runs(tmpdir_root):
    for name in ("train-a", "train-b"):
        checkpoint = tmpdir_root / "ftplat-scratch" / name / "checkpoint-2"
        checkpoint.mkdir(parents=True)
        (checkpoint / "optimizer.pt").write_bytes(b"x")
    assert build_scratch_dir("train-a") == str(tmpdir_root / "ftplat-scratch" / "train-a")
    assert run_remove_scratch(["train-a", "train-missing"]) == [build_scratch_dir("train-a")]
    assert sorted(p.name for p in (tmpdir_root / "ftplat-scratch").iterdir()) == ["train-b"]


def test_the_driver_removes_an_ended_trials_scratch_after_it_settles_and_all_at_the_end(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(driver_scratch, "run_remove_scratch_on_nodes", lambda names: started.append(names) or [])
    clock = [100.0]
    monkeypatch.setattr(driver_scratch.time, "monotonic", lambda: clock[0])
    callback = ScratchCleanupCallback(str(tmp_path), settle_s=10.0)
    trials = [SimpleNamespace(trial_id=t) for t in ("a", "b", "c", "d")]
    write_json(build_trial_result_uri(build_train_run_uri(str(tmp_path), "d")), {})  # d trained to its end

    callback.on_trial_complete(iteration=1, trials=trials, trial=trials[0])  # stopped by ASHA
    callback.on_trial_error(iteration=1, trials=trials, trial=trials[1])
    callback.on_step_end(iteration=2, trials=trials)
    assert started == []  # the stopped trial's workers may still be writing
    clock[0] += 10.0
    callback.on_step_end(iteration=3, trials=trials)
    assert started == [["train-a", "train-b"]]
    callback.on_step_end(iteration=4, trials=trials)
    assert len(started) == 1

    # Tune pickles its callbacks with the experiment: only the settings travel.
    callback.on_trial_complete(iteration=5, trials=trials, trial=trials[2])
    restored = pickle.loads(pickle.dumps(callback))
    assert restored._due == {} and restored._running == [] and restored.settle_s == 10.0

    # c was stopped just now: its worker may still write a checkpoint, so the end waits it out.
    slept = []
    monkeypatch.setattr(driver_scratch.time, "sleep", slept.append)
    clock[0] += 4.0
    callback.on_experiment_end(trials=trials)
    assert slept == [6.0] and started[-1] == ["train-a", "train-b", "train-c", "train-d"]

    # A trial that trained to its end removed its own folders and has no worker left: nothing to
    # wait for, at the end or in between (the end pass still covers it).
    slept.clear()
    callback.on_trial_complete(iteration=6, trials=trials, trial=trials[3])
    assert callback._due == {}
    callback.on_experiment_end(trials=trials)
    assert slept == [] and started[-1] == ["train-a", "train-b", "train-c", "train-d"]


def test_cleanup_failures_never_reach_the_sweep(monkeypatch):
    def unreachable(names):
        raise ConnectionError("raylet gone")

    monkeypatch.setattr(driver_scratch, "run_remove_scratch_on_nodes", unreachable)
    def unreadable(sweep_path, trial_id):
        raise OSError("storage gone")

    monkeypatch.setattr(driver_scratch, "read_trial_finished", unreadable)
    callback = ScratchCleanupCallback("/nonexistent/sweep", settle_s=0.0)
    callback.on_trial_complete(iteration=1, trials=[], trial=SimpleNamespace(trial_id="a"))
    assert list(callback._due) == ["train-a"]  # unknown: waited for like a stopped trial
    callback.on_experiment_end(trials=[SimpleNamespace(trial_id="a")])


def test_a_starting_worker_clears_what_its_runs_killed_worker_left(tmpdir_root):
    from ftplat.train.worker import run_clear_stale_scratch

    stale = tmpdir_root / "ftplat-scratch" / "train-a" / "checkpoint-4"
    stale.mkdir(parents=True)
    run_clear_stale_scratch("train-a", local_rank=1)  # the node's local rank 0 owns deletion
    assert stale.is_dir()
    run_clear_stale_scratch("train-a", local_rank=0)
    assert not (tmpdir_root / "ftplat-scratch" / "train-a").exists()
