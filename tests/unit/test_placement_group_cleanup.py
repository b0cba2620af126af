"""The sweep driver's removal of placement groups that stopped and failed trials leave behind:
when it looks (at most every interval, and until the last controllers die at the end)."""

from __future__ import annotations

import logging
import pickle

from ftplat.tune import placement_groups
from ftplat.tune.placement_groups import PlacementGroupCleanupCallback


def _patch(monkeypatch, live_counts):
    looks, clock = [], [100.0]
    counts = iter(live_counts)
    monkeypatch.setattr(placement_groups, "run_remove_orphaned_groups", lambda job_id: looks.append(job_id) or next(counts))
    monkeypatch.setattr(placement_groups.ray, "get_runtime_context",
                        lambda: type("Ctx", (), {"get_job_id": lambda self: "01000000"})())
    monkeypatch.setattr(placement_groups.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(placement_groups.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    return looks, clock


def test_it_looks_at_most_once_an_interval(monkeypatch):
    looks, clock = _patch(monkeypatch, [0] * 10)
    callback = PlacementGroupCleanupCallback(interval_s=1.0)
    for _ in range(5):
        callback.on_step_end(iteration=1, trials=[])
    assert looks == ["01000000"]
    clock[0] += 1.0
    callback.on_step_end(iteration=2, trials=[])
    assert len(looks) == 2
    restored = pickle.loads(pickle.dumps(callback))  # Tune pickles callbacks with the experiment
    assert restored._next == 0.0 and restored.interval_s == 1.0


def test_the_end_waits_for_the_last_controllers_to_die(monkeypatch):
    looks, clock = _patch(monkeypatch, [2, 1, 0, 5])
    PlacementGroupCleanupCallback(end_wait_s=30.0).on_experiment_end(trials=[])
    assert len(looks) == 3 and clock[0] == 100.4


def test_the_end_gives_up_on_a_controller_that_outlives_the_wait(monkeypatch, caplog):
    looks, clock = _patch(monkeypatch, [1] * 1000)
    with caplog.at_level(logging.WARNING, logger=placement_groups.__name__):
        PlacementGroupCleanupCallback(end_wait_s=2.0).on_experiment_end(trials=[])
    assert 100.0 + 2.0 <= clock[0] < 100.0 + 2.5 and len(looks) <= 12
    assert "1 Train placement group(s) still held by a live controller" in caplog.text


def test_a_failing_look_is_logged_and_never_stops_the_sweep(monkeypatch, caplog):
    _patch(monkeypatch, [])

    def fail(job_id):
        raise ConnectionError("GCS unavailable")

    monkeypatch.setattr(placement_groups, "run_remove_orphaned_groups", fail)
    callback = PlacementGroupCleanupCallback(end_wait_s=1.0)
    with caplog.at_level(logging.WARNING, logger=placement_groups.__name__):
        callback.on_step_end(iteration=1, trials=[])
        callback.on_experiment_end(trials=[])
    assert "Could not look for placement groups" in caplog.text
