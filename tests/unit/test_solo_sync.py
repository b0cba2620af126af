"""A one-worker Train run without Train's synchronization actor (``ray_internals.solo_sync``):
the stand-in answers what the actor would for one rank, is swapped in only while the worker
group starts or stops, and matches the actor's methods in this Ray."""

import inspect
import pickle

import pytest
import ray
from ray.train.v2._internal.execution.checkpoint.sync_actor import SynchronizationActor
from ray.train.v2._internal.execution.worker_group import state, worker_group

from ftplat.ray_internals import solo_sync
from ftplat.ray_internals.solo_sync import SoloSync


@pytest.fixture
def put_in_place(monkeypatch):
    """``ray.put`` without a cluster: the 'ref' is the value itself."""
    monkeypatch.setattr(ray, "put", lambda value: ("ref", value))


def test_the_stand_in_has_the_actors_methods_with_its_parameters():
    actor = SynchronizationActor.__ray_metadata__.modified_class
    for name in ("broadcast_from_rank_zero", "set_required_ranks", "reset"):
        theirs = [p for p in inspect.signature(getattr(actor, name)).parameters if p not in ("self", "_ray_trace_ctx")]
        ours = list(inspect.signature(getattr(SoloSync, name)._fn).parameters)
        assert ours == theirs, name


def test_one_rank_gets_its_own_data_back_and_a_second_rank_is_refused(put_in_place):
    solo = pickle.loads(pickle.dumps(SoloSync()))  # travels to the worker as an argument
    ref = solo.broadcast_from_rank_zero.remote(world_rank=0, world_size=1, data="checkpoint_2026",
                                               caller_method_name="ray.train.report", collective_seq=3,
                                               relaxable=True)
    assert ref == ("ref", "checkpoint_2026")
    assert solo.set_required_ranks.remote([0]) == ("ref", True)
    assert solo.reset.remote() == ("ref", None)
    with pytest.raises(AssertionError, match="rank 1 of 2"):
        solo.broadcast_from_rank_zero.remote(world_rank=1, world_size=2, data=None, caller_method_name="barrier")


def test_the_swap_lasts_only_as_long_as_a_solo_start_or_stop(monkeypatch):
    killed = []
    monkeypatch.setattr(ray, "kill", killed.append)
    real_actor, real_shutdown = worker_group.SynchronizationActor, state._shutdown_sync_actor
    with solo_sync.run_with_solo_sync():
        made = worker_group.SynchronizationActor.options(label_selector={}).remote(timeout_s=1, warn_interval_s=1)
        assert isinstance(made, SoloSync)
        state._shutdown_sync_actor(made)  # nothing to kill
        state._shutdown_sync_actor("a real handle")
    assert killed == ["a real handle"]
    assert (worker_group.SynchronizationActor, state._shutdown_sync_actor) == (real_actor, real_shutdown)

    with pytest.raises(RuntimeError), solo_sync.run_with_solo_sync():
        raise RuntimeError("a worker failed to start")
    assert (worker_group.SynchronizationActor, state._shutdown_sync_actor) == (real_actor, real_shutdown)
