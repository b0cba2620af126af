"""A trial's wall time split into start-up, Trainer build, training and teardown (tune/timeline.py)."""

from __future__ import annotations

import pytest

from ftplat.tune.timeline import TIMELINE_PARTS, build_trial_timeline

DRIVER = {"started": 100.0, "fit_started": 101.5, "fit_ended": 160.0, "ended": 160.4}
WORKER = {"entered": 105.0, "started": 109.0, "trainer_built": 112.0, "trained": 157.0, "returned": 157.5}


def test_parts_cover_the_trial_and_overhead_is_all_but_training():
    parts = build_trial_timeline(DRIVER, WORKER)
    assert parts == pytest.approx({"driver_setup": 1.5, "train_startup": 3.5, "worker_imports": 4.0,
                                   "trainer_build": 3.0, "train": 45.0,
                                   "worker_finish": 0.5, "train_teardown": 2.5, "driver_finish": 0.4,
                                   "overhead": 15.4})
    assert sum(parts[name] for name, _, _ in TIMELINE_PARTS) == pytest.approx(DRIVER["ended"] - DRIVER["started"])


def test_a_worker_that_returned_nothing_leaves_its_parts_out():
    parts = build_trial_timeline(DRIVER, None)
    assert parts == pytest.approx({"driver_setup": 1.5, "driver_finish": 0.4})
