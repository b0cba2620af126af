"""Train V2's synchronization actor, left out of a run of one worker.

Every Train V2 worker group starts a ``SynchronizationActor``: a process of its own (importing
Ray Train, about 2.4 s of a core while the trial's worker starts) whose only job is to hold a
barrier that all ranks join: ``ray.train.report`` agrees on the checkpoint folder's name there,
and ``ray.train.collective`` broadcasts through it. With one rank there is nobody to wait for
and rank 0's data is the answer, so a run of one worker gets ``SoloSync`` instead, answered in
the caller's own process. Its methods are called the way an actor's are
(``handle.method.remote(...)``, then ``ray.get``), so each returns an object ref.

Ray creates the actor and kills it by module-level names inside its worker group code
(``worker_group.SynchronizationActor``, ``state._shutdown_sync_actor``); ``run_with_solo_sync``
swaps both, and ``lean_worker_group.LeanWorkerGroup`` uses it only while its own start,
shutdown or abort runs, and only for one worker.
``test_solo_sync`` checks that both names are still there, and the stand-in against the actor.
"""

from __future__ import annotations

import contextlib


class _Call:
    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args, **kwargs):
        import ray

        return ray.put(self._fn(*args, **kwargs))


def _broadcast_from_rank_zero(*, world_rank: int, world_size: int, data, caller_method_name: str,
                              collective_seq=None, relaxable: bool = False):
    assert world_rank == 0 and world_size == 1, (
        f"{caller_method_name} from rank {world_rank} of {world_size}: SoloSync serves one worker only")
    return data


class SoloSync:
    """``SynchronizationActor``'s methods for a world of one rank."""

    broadcast_from_rank_zero = _Call(_broadcast_from_rank_zero)
    # A preemption narrows the barrier to the surviving ranks, a replaced replica group resets
    # it: with one rank there is no barrier to narrow or to reset.
    set_required_ranks = _Call(lambda ranks: True)
    reset = _Call(lambda: None)


class _SoloSyncActorClass:
    """What ``SynchronizationActor.options(...).remote(...)`` is called on in a solo start."""

    def options(self, **_):
        return self

    def remote(self, **_):
        return SoloSync()


@contextlib.contextmanager
def run_with_solo_sync():
    """Within the block, Ray's worker-group code makes ``SoloSync`` where it would start the
    actor, and kills no stand-in; both names are Ray's own again after it, errors included."""
    from ray.train.v2._internal.execution.worker_group import state, worker_group

    real_actor, real_shutdown = worker_group.SynchronizationActor, state._shutdown_sync_actor

    def shutdown_sync_actor(sync_actor):
        if not isinstance(sync_actor, SoloSync):
            real_shutdown(sync_actor)

    worker_group.SynchronizationActor, state._shutdown_sync_actor = _SoloSyncActorClass(), shutdown_sync_actor
    try:
        yield
    finally:
        worker_group.SynchronizationActor, state._shutdown_sync_actor = real_actor, real_shutdown
