"""Every use of Ray behaviour that is not public API, in one package, behind a version check.

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
  ``--resume`` is refused before Ray starts when ``Tuner.restore`` would not find one. And the
  flag that makes Tune save that state at the end of a step (``_should_force_sync_up`` of its
  experiment checkpoint manager): ftplat's schedulers set it when a trial is added or ends.
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
* Train V2's worker group's synchronization actor, created and killed through module globals
  (``worker_group.SynchronizationActor``, ``state._shutdown_sync_actor``): a run of one worker
  gets an in-process stand-in instead of an actor process (``solo_sync``).
* Train V2's worker group's worker class (``WorkerGroup._worker_cls``) and its worker's
  ``poll_status``: ftplat's worker says it has finished at the poll that takes the last report
  of a returned function, one poll earlier than Train's (``lean_worker_group``).
* Train V2's autoscaling coordinator (``get_or_create_autoscaling_coordinator``, a detached
  actor Ray Data defines), which each run asks for its workers' resources before it places
  them: the sweep driver starts it before the first trial asks.
* The GCS placement group table's creator fields (``PlacementGroupTableData``), which Ray's
  public ``placement_group_table`` leaves out, and the class names in its actor table (Tune's
  ``ImplicitFunc`` for a trial driver).
* Train V2's storage context inside a worker (``get_storage()``, a DeveloperAPI: the run's
  folder, filesystem and upload) and the marker file it writes there: a worker hard-links its
  checkpoints into a local storage folder its node sees instead of having Ray copy them.
* Tune's ``OptunaSearch`` state (its trials, finished ones, study and space): a failed trial
  that ``--resume`` runs again gets a new Optuna trial of its values (``optuna_search``).

``check_ray_version`` runs before a sweep or a checkpoint gc starts and refuses a Ray release
these were not verified against; widen ``VERIFIED_RAY_SERIES`` after running the test suite
(its contract tests use Ray's own classes) against a new release.
"""

from __future__ import annotations

import importlib.metadata

from ftplat.errors import UserError
# The package's names, from the module that holds each: snapshot (Train's checkpoint snapshot),
# train_runs (how a trial runs its Train run, with lean_worker_group and solo_sync: its workers
# and its one-worker barrier), run_storage (a worker's view of its run's storage), tune_trials
# (Tune's trials and state), cluster.
from ftplat.ray_internals.cluster import GCS_PORT_ENV, read_dashboard_url, run_init_private_cluster  # noqa: F401
from ftplat.ray_internals.optuna_search import (  # noqa: F401
    ResumableConcurrencyLimiter,
    ResumableOptunaSearch,
    build_finite_objective,
)
from ftplat.ray_internals.run_storage import STORAGE_MARKER_FILE, RunStorage, read_run_storage  # noqa: F401
from ftplat.ray_internals.snapshot import (  # noqa: F401
    SNAPSHOT_FILE,
    build_pruned_snapshot,
    select_snapshot_latest,
    select_snapshot_names,
)
from ftplat.ray_internals.train_runs import (  # noqa: F401
    PREEMPTION_WATCHER_ENV,
    PRINT_PATCH_ENV,
    TRAIN_CONTROLLER_CLASS,
    TRAIN_GROUP_CREATOR_CLASSES,
    TRAIN_POLL_INTERVAL_ENV,
    TRIAL_DRIVER_CLASS,
    WORKER_START_TIMEOUT_ENV,
    build_lean_trainer_class,
    read_orphaned_train_placement_groups,
    run_disable_train_print_patch,
    run_start_autoscaling_coordinator,
    select_actor_class_name,
)
from ftplat.ray_internals.tune_trials import (  # noqa: F401
    TUNE_RESULT_FILE,
    read_experiment_state_mtime,
    read_missing_tune_state,
    read_newest_experiment_state,
    read_torn_tune_state,
    read_trial_error,
    read_trial_result_rows,
    request_experiment_state_save,
    sort_trials_by_creation,
)

#: ``major.minor`` series of Ray this package was verified against.
VERIFIED_RAY_SERIES = ("2.60",)


def check_ray_version(version: str | None = None) -> str:
    """The installed Ray version; ``UserError`` when it is not a verified release."""
    if version is None:
        version = importlib.metadata.version("ray")
    series = ".".join(version.split(".")[:2])
    if series not in VERIFIED_RAY_SERIES:
        verified = ", ".join(f"{s}.x" for s in VERIFIED_RAY_SERIES)
        raise UserError(
            f"Ray {version} is installed, but ftplat was verified against Ray {verified} only (it relies on "
            f"Train V2 internals: see ftplat/ray_internals/); install 'ray[train,tune,default]=="
            f"{VERIFIED_RAY_SERIES[-1]}.*'"
        )
    return version
