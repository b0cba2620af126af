"""Which placement groups the sweep driver removes: only those of its own job whose creator was
a Train controller that has died; never a group a live controller, another actor or a driver
(Tune's trial resources) created."""

from __future__ import annotations

import sys
import time

import pytest
import ray
from ray import cloudpickle
from ray.util import placement_group, placement_group_table, remove_placement_group
from ray.util.placement_group import PlacementGroup

from ftplat.ray_internals import TRAIN_CONTROLLER_CLASS
from ftplat.tune.placement_groups import run_remove_orphaned_groups

pytestmark = pytest.mark.integration
# Ray's workers cannot import a test module: its classes travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _Creator:
    def make(self) -> str:
        group = placement_group([{"CPU": 0.1}])
        ray.get(group.ready(), timeout=60)
        return group.id.hex()


# The GCS knows an actor by its class's name; Train's controller is the only one it must match.
TrainController = type(TRAIN_CONTROLLER_CLASS, (_Creator,), {})
Other = type("Other", (_Creator,), {})


@ray.remote(num_cpus=0)
class _Owner:
    """A trial driver: it owns its creators, which die with it."""

    def __init__(self):
        self.creators = [ray.remote(num_cpus=0)(cls).remote() for cls in (TrainController, Other)]

    def make(self) -> list[str]:
        return ray.get([c.make.remote() for c in self.creators])


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


def test_only_a_dead_train_controllers_group_is_removed(ray_cluster):
    job = ray.get_runtime_context().get_job_id()
    drivers = placement_group([{"CPU": 0.1}])
    ray.get(drivers.ready(), timeout=60)
    live_owner, dead_owner = _Owner.remote(), _Owner.remote()
    live, dead = ray.get(live_owner.make.remote()), ray.get(dead_owner.make.remote())
    ray.kill(dead_owner)
    assert _remove_until(job, dead[0]) == 1  # the live owner's controller
    assert _states(dead) == ["REMOVED", "CREATED"]
    assert _states(live) == ["CREATED", "CREATED"] and _states([drivers.id.hex()]) == ["CREATED"]

    ray.kill(live_owner)
    assert _remove_until(job, live[0]) == 0
    assert _states(live) == ["REMOVED", "CREATED"]
    for group in (drivers.id.hex(), live[1], dead[1]):
        remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(group)))
