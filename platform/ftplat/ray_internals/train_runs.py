"""How a trial runs its Train run: the lean trainer classes (the controller in the trial
driver, no dataset manager or cleaner), Train's environment switches, its autoscaling
coordinator, and the placement groups of trials that died."""

from __future__ import annotations

import functools
import os

#: ``ray.train.v2._internal.constants.ENABLE_PRINT_PATCH_ENV_VAR``
PRINT_PATCH_ENV = "RAY_TRAIN_ENABLE_PRINT_PATCH"
#: ``ray.train.v2._internal.constants.WORKER_GROUP_START_TIMEOUT_S_ENV_VAR``
WORKER_START_TIMEOUT_ENV = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"
#: ``ray.train.v2._internal.constants.HEALTH_CHECK_INTERVAL_S_ENV_VAR``: how often a Train
#: controller polls its workers (default 2 s), so also how long it can take to see them finish.
TRAIN_POLL_INTERVAL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
#: ``ray.train.v2._internal.constants.ENABLE_PREEMPTION_WATCHER_ENV_VAR``: a Train controller
#: starts one more actor per run that watches for draining nodes and logs them.
PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


def run_disable_train_print_patch() -> None:
    """Train V2 patches print() in its workers to go through the root logger and, because Ray
    workers replace sys.stdout, also tees it to stdout, so every Trainer log line would reach
    the driver and ``ray job logs`` twice. Train passes this variable from the process calling
    fit() to its controller and workers; a value set by the user wins."""
    os.environ.setdefault(PRINT_PATCH_ENV, "0")


@functools.cache
def build_lean_trainer_class(*, process_group: bool) -> type:
    """Train V2's trainer for ftplat's runs, less what a run does not use or what the sweep
    driver does for all its trials.

    ``process_group``: the run's workers form a torch process group (``TorchTrainer``). Without
    one (a single worker without DeepSpeed, which trains as plain ``Trainer.train()`` does) it
    is a ``DataParallelTrainer`` with Train's no-op backend: ``ray.train.torch`` imports torch
    at its top, so the trial driver that builds a ``TorchTrainer`` and the controller that
    unpickles its ``TorchConfig`` each import torch (2-3 s of a core apiece, on the way to the
    worker's first line) only to set up a group of one. The worker imports torch either way.

    Either class drops Train V2's datasets callback when the run is given no Ray Dataset: for
    every run it starts a ``DatasetManager`` actor (a process importing Ray Data, about 1.7 s of
    a core while the trial's worker starts) and hands the workers its shard provider; without
    datasets nothing ever asks it (``ray.train.get_dataset_shard`` has no dataset to name).
    ftplat's workers read their data from the object store. A run given datasets keeps it.

    Both drop Train's ``PlacementGroupCleanerCallback``. It starts a detached cleaner actor per
    run (a process importing Ray Train, about 2.5 s of a core beside the starting worker, which
    then asks the dashboard's state API every second whether its controller lives) so that the
    run's placement group goes when its controller dies without removing it: a group an actor
    creates lives as long as its job, and Tune kills the trial driver, and with it the
    controller, of every trial it stops. ftplat's sweep driver removes those groups for all of
    its trials (``ftplat.tune.placement_groups``), so these classes are only for trial drivers.

    Both run the run's ``TrainController`` in the calling process (the trial driver) instead of
    an actor of its own. Train makes it a zero-CPU actor pinned to the caller's node that the
    caller only waits on; as an actor it is one more fresh process per trial, whose start and
    imports (about 2 s of a core) come before the controller can ask for the workers' placement
    group. In the driver, the same coroutine runs on an event loop of the calling thread. The
    run's placement group is then created by the trial driver (``TRIAL_DRIVER_CLASS``); Tune's
    kill of a stopped trial's driver ends the controller and, through ownership, its workers,
    as it did before. The workers' ``controller_actor`` handle names the trial driver: only
    ``ray.train.get_all_reported_checkpoints`` calls it, and ftplat's workers never do.

    A run of one worker has no synchronization actor either (``solo_sync``): one process fewer
    per trial, whose start competes with the worker's. And the controller sees a run end at
    the poll that takes its last report, not one poll later (``lean_worker_group``).
    """
    import asyncio

    from ray.train.v2._internal.callbacks.datasets import DatasetsCallback
    from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback
    from ray.train.v2._internal.execution.controller import TrainController

    from ftplat.ray_internals.lean_worker_group import build_lean_worker_group_class

    if process_group:
        from ray.train.torch import TorchTrainer as base
    else:
        from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer as base

    class LeanController(TrainController):
        worker_group_cls = build_lean_worker_group_class()

    class LeanTrainer(base):
        def _create_default_callbacks(self):
            dropped = (PlacementGroupCleanerCallback,) + (() if self.datasets else (DatasetsCallback,))
            return [c for c in super()._create_default_callbacks() if not isinstance(c, dropped)]

        def _initialize_and_run_controller(self, **controller_init_kwargs):
            async def run():
                controller = LeanController(**controller_init_kwargs)
                await controller.run()
                return controller.get_result()

            return asyncio.run(run())

    LeanTrainer.__name__ = LeanTrainer.__qualname__ = f"Lean{base.__name__}"
    return LeanTrainer


def run_start_autoscaling_coordinator() -> None:
    """Start the cluster's autoscaling coordinator now, without waiting for it.

    Before a Train run places its workers, its controller asks this detached actor for their
    resources (so that an autoscaling cluster can grow) and waits for the answer; the run that
    finds none creates it, and on a fresh cluster the first trial then waits for a new process
    to start (about 1 s on 2 cores). Asked from the sweep driver, it starts beside Tune's own
    start and the first trial's driver. Train gets it by the same name (``get_if_exists``).
    """
    from ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator import (
        get_or_create_autoscaling_coordinator,
    )

    get_or_create_autoscaling_coordinator()


#: ``ActorTableData.class_name`` of Train V2's controller actor, the creator of a run's
#: placement group when Train runs it as an actor of its own.
TRAIN_CONTROLLER_CLASS = "TrainController"
#: The class name of a Tune trial driver (``wrap_function``'s class): ftplat's lean trainers
#: run the controller there, so it creates the trial's Train placement group.
TRIAL_DRIVER_CLASS = "ImplicitFunc"
#: Actors whose placement groups are a Train run's; the trial driver creates no other group.
TRAIN_GROUP_CREATOR_CLASSES = frozenset({TRAIN_CONTROLLER_CLASS, TRIAL_DRIVER_CLASS})


def select_actor_class_name(listed: str) -> str:
    """An actor's class name as Ray lists it, without the scopes of its ``__qualname__``: a trial
    driver has shown up in the actor table and the state API both as ``ImplicitFunc`` and as
    ``wrap_function.<locals>.ImplicitFunc`` (Tune defines the class in a function)."""
    return listed.rsplit(".", 1)[-1]


@functools.lru_cache(maxsize=4096)
def _actor_class_name(actor_id_hex: str) -> str | None:
    from ray._private.state import state

    name = state.actor_table(actor_id_hex).get("ActorClassName")  # an actor's class never changes
    return select_actor_class_name(name) if name else None


def read_orphaned_train_placement_groups(job_id: str) -> tuple[list[str], int]:
    """The placement groups of job ``job_id`` whose Train controller died without removing them
    (hex ids), and how many of the job's Train groups still have a live controller. A group's
    controller is its creator: a trial driver running it (``TRIAL_DRIVER_CLASS``) or Train's own
    controller actor; no other actor of those classes creates a group.

    Ray frees a group an actor created only once both that actor and its job are dead; only
    the GCS table (not ``ray.util.placement_group_table``) says who created a group. Groups a
    driver created (Tune's trial resources) have no creator actor and are never listed.
    """
    import ray
    from ray._private.state import state
    from ray.core.generated.gcs_pb2 import PlacementGroupTableData as Row

    orphaned, live = [], 0
    for raw in state._connect_and_get_accessor().get_placement_group_table():
        row = Row.FromString(raw)
        creator = ray.ActorID(row.creator_actor_id)
        if (row.state == Row.REMOVED or row.is_detached or row.creator_job_id.hex() != job_id or creator.is_nil()
                or _actor_class_name(creator.hex()) not in TRAIN_GROUP_CREATOR_CLASSES):
            continue
        if row.creator_actor_dead:
            orphaned.append(ray.PlacementGroupID(row.placement_group_id).hex())
        else:
            live += 1
    return orphaned, live
