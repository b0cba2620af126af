"""Which placement groups the sweep driver removes: only those of its own job whose creator, a
trial driver running its Train controller (or Train's own controller actor), has died; never a
group a live one, another actor or a driver (Tune's trial resources) created."""

from __future__ import annotations

import sys
import time

import pytest
import ray
from ray import cloudpickle
from ray.util import placement_group, placement_group_table, remove_placement_group
from ray.util.placement_group import PlacementGroup

from ftplat.ray_internals import TRAIN_CONTROLLER_CLASS, TRIAL_DRIVER_CLASS
from ftplat.tune.placement_groups import run_remove_orphaned_groups

pytestmark = pytest.mark.integration
# Ray's workers cannot import a test module: its classes travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _make_group() -> str:
    group = placement_group([{"CPU": 0.1}])
    ray.get(group.ready(), timeout=60)
    return group.id.hex()


class _Creator:
    def make(self) -> str:
        return _make_group()


# The GCS knows an actor by its class's name: a Train controller actor, and any other actor.
TrainController = type(TRAIN_CONTROLLER_CLASS, (_Creator,), {})
Other = type("Other", (_Creator,), {})


class _Driver:
    """A trial driver: it creates its Train run's group itself (ftplat runs the controller in
    it) and owns its other actors, which die with it."""

    def __init__(self):
        self.creators = [ray.remote(num_cpus=0)(cls).remote() for cls in (TrainController, Other)]

    def make(self) -> list[str]:
        """Its own group, then those of a Train controller actor and of another actor."""
        return [_make_group(), *ray.get([c.make.remote() for c in self.creators])]


TrialDriver = ray.remote(num_cpus=0)(type(TRIAL_DRIVER_CLASS, (_Driver,), {}))


def _states(ids) -> list[str]:
    table = placement_group_table()
    return [table[i]["state"] for i in ids]


def _remove_until(job: str, group: str) -> int:
    """Look as the sweep driver does until ``group`` is removed (the GCS learns of a death a
    moment after the kill); return how many Train groups still have a live controller."""
    deadline = time.monotonic() + 30
    while True:
        live = run_remove_orphaned_groups(job)
        if _states([group]) == ["REMOVED"] or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


def test_only_the_groups_of_a_dead_trial_driver_and_train_controller_are_removed(ray_cluster):
    job = ray.get_runtime_context().get_job_id()
    drivers = placement_group([{"CPU": 0.1}])
    ray.get(drivers.ready(), timeout=60)
    live_driver, dead_driver = TrialDriver.remote(), TrialDriver.remote()
    live, dead = ray.get(live_driver.make.remote()), ray.get(dead_driver.make.remote())
    ray.kill(dead_driver)
    _remove_until(job, dead[0])
    assert _remove_until(job, dead[1]) == 2  # the live driver's own group and its controller's
    assert _states(dead) == ["REMOVED", "REMOVED", "CREATED"]
    assert _states(live) == ["CREATED", "CREATED", "CREATED"] and _states([drivers.id.hex()]) == ["CREATED"]

    ray.kill(live_driver)
    _remove_until(job, live[0])
    assert _remove_until(job, live[1]) == 0
    assert _states(live) == ["REMOVED", "REMOVED", "CREATED"]
    for group in (drivers.id.hex(), live[2], dead[2]):
        remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(group)))
