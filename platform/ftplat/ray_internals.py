"""Every use of Ray behaviour that is not public API, in one place, behind a version check.

ftplat relies on a few things Ray does not promise to keep:

* Train V2's checkpoint snapshot (``checkpoint_manager_snapshot.json`` in each Train run): the
  checkpoint gc rewrites it without the folders it deletes, because Ray refuses to restore a run
  whose snapshot names a missing folder. Its keys are checked before any rewrite.
* Train V2's environment switch for its ``print`` patch (turned off in trial drivers, or every
  Trainer log line reaches the driver twice).
* ``ray._private.worker.get_dashboard_url`` (the dashboard link recorded in MLflow).
* The GCS port variable of a new head (``run_init_private_cluster``): Ray's own processes in a
  private cluster are told its address, or with several clusters on a host Train V2's
  placement-group cleaner can look up the wrong one and remove a live trial's resources.
* Tune's experiment state file (found with ``_find_newest_experiment_checkpoint``): a
  ``--resume`` is refused before Ray starts when ``Tuner.restore`` would not find one.
* A Tune trial's ``run_metadata.error_filename`` and ``storage`` (the last line of a failed
  trial's error file goes into the summary; live retention reads the trial's ``result.json``
  after a resume, as the summary does).
* The running count that both of Tune's proposers put at the start of ``experiment_tag``
  (the only record of the order trials were created in, which breaks ties between scores).
* Train V2's default controller callbacks (``_create_default_callbacks``), its datasets
  callback and its placement-group cleaner callback: a run given no Ray Dataset skips the
  first, which would start a dataset manager actor that nothing asks; every run skips the
  second, a detached cleaner actor per run, because the sweep driver does its job for all
  trials (``read_orphaned_train_placement_groups``).
* Train V2's ``_initialize_and_run_controller`` and its ``TrainController`` (an async class Ray
  makes an actor): ftplat's trainers run the controller in the trial driver's own process.
* The GCS placement group table's creator fields (``PlacementGroupTableData``), which Ray's
  public ``placement_group_table`` leaves out, and the class names in its actor table (Tune's
  ``ImplicitFunc`` for a trial driver).

``check_ray_version`` runs before a sweep or a checkpoint gc starts and refuses a Ray release
these were not verified against; widen ``VERIFIED_RAY_SERIES`` after running the test suite
(its contract tests use Ray's own classes) against a new release.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import posixpath
from collections.abc import Collection, Iterable
from typing import Any

import pyarrow.fs as pafs

from ftplat.environment import scoped_environ
from ftplat.errors import UserError

#: ``major.minor`` series of Ray this module was verified against.
VERIFIED_RAY_SERIES = ("2.60",)

#: ``ray.train.v2._internal.constants.CHECKPOINT_MANAGER_SNAPSHOT_FILENAME``
SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"
#: ``ray.train.v2._internal.constants.ENABLE_PRINT_PATCH_ENV_VAR``
PRINT_PATCH_ENV = "RAY_TRAIN_ENABLE_PRINT_PATCH"
#: ``ray.air.constants.EXPR_RESULT_FILE``: Tune's results of one trial, a JSON object a line.
TUNE_RESULT_FILE = "result.json"
#: ``ray.train.v2._internal.constants.WORKER_GROUP_START_TIMEOUT_S_ENV_VAR``
WORKER_START_TIMEOUT_ENV = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"
#: ``ray.train.v2._internal.constants.HEALTH_CHECK_INTERVAL_S_ENV_VAR``: how often a Train
#: controller polls its workers (default 2 s), so also how long it can take to see them finish.
TRAIN_POLL_INTERVAL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
#: ``ray.train.v2._internal.constants.ENABLE_PREEMPTION_WATCHER_ENV_VAR``: a Train controller
#: starts one more actor per run that watches for draining nodes and logs them.
PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"

_SNAPSHOT_KEYS = ("checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result",
                  "pending_training_results", "pending_validation_specs")
_SNAPSHOT_NAME_LISTS = ("validated_checkpoint_dir_names", "timed_out_validation_checkpoint_dir_names",
                        "failed_validation_checkpoint_dir_names")


def check_ray_version(version: str | None = None) -> str:
    """The installed Ray version; ``UserError`` when it is not a verified release."""
    if version is None:
        version = importlib.metadata.version("ray")
    series = ".".join(version.split(".")[:2])
    if series not in VERIFIED_RAY_SERIES:
        verified = ", ".join(f"{s}.x" for s in VERIFIED_RAY_SERIES)
        raise UserError(
            f"Ray {version} is installed, but ftplat was verified against Ray {verified} only (it relies on "
            f"Train V2 internals: see ftplat/ray_internals.py); install 'ray[train,tune,default]=="
            f"{VERIFIED_RAY_SERIES[-1]}.*'"
        )
    return version


# --- Train V2's checkpoint snapshot --------------------------------------------------------

def _parse_snapshot(snapshot_json: str) -> dict[str, Any]:
    state = json.loads(snapshot_json)
    missing = [k for k in _SNAPSHOT_KEYS if k not in state]
    if missing or len(state["checkpoint_results"]) != len(state["checkpoint_report_indices"]):
        # Another Ray version's layout: better to stop than to write a snapshot Ray rejects.
        raise ValueError(f"unrecognised Ray checkpoint manager snapshot (missing {missing or 'consistency'})")
    return state


def select_snapshot_latest(snapshot_json: str) -> str | None:
    """The checkpoint a restore of the run resumes from: the latest one Ray registered."""
    latest = _parse_snapshot(snapshot_json)["latest_checkpoint_result"]
    return None if latest is None else latest["checkpoint_dir_name"]


def select_snapshot_names(snapshot_json: str) -> set[str]:
    """Every checkpoint folder a Ray Train V2 snapshot refers to."""
    state = _parse_snapshot(snapshot_json)
    entries = [*state["checkpoint_results"], *state["pending_training_results"]]
    if state["latest_checkpoint_result"] is not None:
        entries.append(state["latest_checkpoint_result"])
    return {entry["checkpoint_dir_name"] for entry in entries}


def build_pruned_snapshot(snapshot_json: str, kept_names: Collection[str]) -> str:
    """A Ray Train V2 ``checkpoint_manager_snapshot.json`` without the checkpoints not in
    ``kept_names``, still loadable by Ray's ``CheckpointManager._load_state``.

    The per-checkpoint lists stay parallel (results with report indices, pending results with
    validation specs). If the latest checkpoint goes, the latest becomes the surviving
    checkpoint reported last (none if nothing survives): Ray looks the latest up among the
    results, and a restore resumes from it. Everything else (``ray_version``,
    ``current_report_index``, unknown keys) is left as it was.
    """
    state = _parse_snapshot(snapshot_json)
    kept_names = set(kept_names)

    def keep(entry: dict) -> bool:
        return entry["checkpoint_dir_name"] in kept_names

    results = [(r, i) for r, i in zip(state["checkpoint_results"], state["checkpoint_report_indices"]) if keep(r)]
    state["checkpoint_results"] = [r for r, _ in results]
    state["checkpoint_report_indices"] = [i for _, i in results]
    pending = [(r, v) for r, v in zip(state["pending_training_results"], state["pending_validation_specs"]) if keep(r)]
    state["pending_training_results"] = [r for r, _ in pending]
    state["pending_validation_specs"] = [v for _, v in pending]
    for key in _SNAPSHOT_NAME_LISTS:
        if key in state:
            state[key] = [name for name in state[key] if name in kept_names]
    latest = state["latest_checkpoint_result"]
    if latest is not None and not keep(latest):
        state["latest_checkpoint_result"] = max(results, key=lambda ri: ri[1])[0] if results else None
    return json.dumps(state, separators=(",", ":"))


# --- processes and trials ------------------------------------------------------------------

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
    """
    import asyncio

    from ray.train.v2._internal.callbacks.datasets import DatasetsCallback
    from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback
    from ray.train.v2._internal.execution.controller import TrainController

    if process_group:
        from ray.train.torch import TorchTrainer as base
    else:
        from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer as base

    class LeanTrainer(base):
        def _create_default_callbacks(self):
            dropped = (PlacementGroupCleanerCallback,) + (() if self.datasets else (DatasetsCallback,))
            return [c for c in super()._create_default_callbacks() if not isinstance(c, dropped)]

        def _initialize_and_run_controller(self, **controller_init_kwargs):
            async def run():
                controller = TrainController(**controller_init_kwargs)
                await controller.run()
                return controller.get_result()

            return asyncio.run(run())

    LeanTrainer.__name__ = LeanTrainer.__qualname__ = f"Lean{base.__name__}"
    return LeanTrainer


def read_missing_tune_state(sweep_path: str) -> str | None:
    """What ``tune.Tuner.restore`` would miss in ``sweep_path``, None when it can restore it.

    ``Tuner.can_restore`` looks for ``tuner.pkl`` only, written when the tuner is built; the
    restore also needs an experiment state file, which Tune writes once ``fit`` runs, and
    fails without one after the cluster has started (Ray names the file only privately).
    """
    from ray import tune
    from ray.tune.execution.experiment_state import _find_newest_experiment_checkpoint
    from ray.tune.execution.tune_controller import TuneController

    if not tune.Tuner.can_restore(sweep_path):
        return "tuner.pkl"
    if _find_newest_experiment_checkpoint(sweep_path) is None:
        return TuneController.CKPT_FILE_TMPL.format("<time>")
    return None


def read_dashboard_url() -> str | None:
    """The dashboard address of the connected cluster (Ray has no public accessor)."""
    from ray._private.worker import get_dashboard_url

    return get_dashboard_url()


def read_trial_error(trial) -> str | None:
    """The last line of a failed Tune trial's error file, None when it did not fail."""
    name = trial.run_metadata.error_filename
    if not name:
        return None

    def last_line(data: bytes) -> str:
        lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "error"

    # Tune writes the file on the driver first (Trial.error_file) and copies it to storage at
    # its next sync: a callback told of the error finds it only in the first place.
    try:
        local = trial.error_file
    except Exception:  # noqa: BLE001 - a Trial outside a Ray session has no driver staging folder
        local = None
    if local and os.path.isfile(local):
        with open(local, "rb") as src:
            return last_line(src.read())
    try:
        fs = trial.storage.storage_filesystem
        with fs.open_input_stream(posixpath.join(trial.storage.trial_fs_path, name)) as src:
            return last_line(src.read())
    except OSError:
        return "error (details in the trial folder)"


def read_trial_result_rows(trial) -> list[dict] | None:
    """Every result Tune recorded for ``trial`` (its ``result.json`` in storage, which a
    ``--resume`` keeps), oldest first; None when the trial has no storage folder yet."""
    storage = getattr(trial, "storage", None)
    if storage is None or storage.trial_dir_name is None:
        return None
    fs, path = storage.storage_filesystem, posixpath.join(storage.trial_fs_path, TUNE_RESULT_FILE)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    with fs.open_input_stream(path) as src:
        lines = src.read().decode("utf-8").splitlines()
    # A driver killed mid-write can leave a torn last line: the rows before it still count.
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _creation_index(experiment_tag: str | None) -> int | None:
    head = (experiment_tag or "").split("_", 1)[0]
    return int(head) if head.isdigit() else None


def sort_trials_by_creation(trials: Iterable[Any]) -> list[Any]:
    """Tune trials in the order their search algorithm created them.

    Ties between equal scores go to the earlier trial, so every place that ranks trials (the
    summary's winner, retention during and after the sweep) must see one order. Neither of
    Tune's lists gives it: the experiment state stores trials in the iteration order of a
    set of trials waiting to be saved, so ``ExperimentAnalysis.trials`` (and a resumed
    controller's list) can swap trials created together. Both of Tune's proposers start every
    ``experiment_tag`` with their running count; trials without one keep their given order, last.
    """

    def key(item: tuple[int, Any]) -> tuple[bool, int, int]:
        given, trial = item
        created = _creation_index(getattr(trial, "experiment_tag", None))
        return (created is None, created or 0, given)

    return [trial for _, trial in sorted(enumerate(trials), key=key)]


#: ``ActorTableData.class_name`` of Train V2's controller actor, the creator of a run's
#: placement group when Train runs it as an actor of its own.
TRAIN_CONTROLLER_CLASS = "TrainController"
#: The class name of a Tune trial driver (``wrap_function``'s class): ftplat's lean trainers
#: run the controller there, so it creates the trial's Train placement group.
TRIAL_DRIVER_CLASS = "ImplicitFunc"
#: Actors whose placement groups are a Train run's; the trial driver creates no other group.
TRAIN_GROUP_CREATOR_CLASSES = frozenset({TRAIN_CONTROLLER_CLASS, TRIAL_DRIVER_CLASS})


@functools.lru_cache(maxsize=4096)
def _actor_class_name(actor_id_hex: str) -> str | None:
    from ray._private.state import state

    return state.actor_table(actor_id_hex).get("ActorClassName")  # an actor's class never changes


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


# --- private local clusters ----------------------------------------------------------------

#: ``ray._private.ray_constants.GCS_PORT_ENVIRONMENT_VARIABLE``: the port a new head's GCS binds.
GCS_PORT_ENV = "RAY_GCS_SERVER_PORT"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run_init_private_cluster(**init_kwargs: Any):
    """``ray.init(address="local", ...)`` whose own processes know which cluster they are in.

    Ray's processes look their cluster up when they call the state API without an address
    (Train V2's PlacementGroupCleaner checks that its controller is alive that way). With
    several clusters on one host the lookup finds another one, the controller seems dead, and
    the cleaner removes the placement group of a trial that is still training. The GCS port is
    chosen here and ``RAY_ADDRESS`` names it while Ray spawns its processes, which inherit it;
    this process's environment is put back afterwards.
    """
    import ray

    port = _free_port()
    address = f"{ray.util.get_node_ip_address()}:{port}"
    with scoped_environ({GCS_PORT_ENV: str(port), "RAY_ADDRESS": address}):
        return ray.init(address="local", **init_kwargs)
