"""What ftplat reads of Tune's trials and experiment state that Tune does not publish."""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Iterable
from typing import Any

import pyarrow.fs as pafs

#: ``ray.air.constants.EXPR_RESULT_FILE``: Tune's results of one trial, a JSON object a line.
TUNE_RESULT_FILE = "result.json"


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


def read_torn_tune_state(sweep_path: str) -> str | None:
    """Why the newest experiment state Tune would restore from cannot be read (a write torn by a
    full disk or a lost mount), None when it parses. Tune would not refuse it: it logs "Failed
    to restore the run state" and starts the experiment afresh, whose trials have no values."""
    from ray.train._internal.storage import get_fs_and_path
    from ray.tune.execution.experiment_state import _find_newest_experiment_checkpoint

    fs, path = get_fs_and_path(sweep_path)
    newest = _find_newest_experiment_checkpoint(path, fs=fs)
    if newest is None:
        return None
    try:
        with fs.open_input_stream(newest) as src:
            json.loads(src.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        return f"{posixpath.basename(newest)} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    return None


def read_newest_experiment_state(fs: pafs.FileSystem, sweep_path: str) -> str | None:
    """The path of the sweep's newest experiment-state file (Tune names each run's by its start
    time), None when it has none."""
    from ray.tune.execution.experiment_state import _find_newest_experiment_checkpoint

    return _find_newest_experiment_checkpoint(sweep_path, fs=fs)


def read_experiment_state_mtime(fs: pafs.FileSystem, sweep_path: str) -> float | None:
    """When Tune last saved the experiment state of the sweep at ``sweep_path`` (in ``fs``),
    in POSIX seconds; None when it has none. A running sweep saves it every 10 s or so and
    whenever a trial starts or ends, and once more as ``fit`` returns; nothing writes it after."""
    newest = read_newest_experiment_state(fs, sweep_path)
    if newest is None:
        return None
    mtime = fs.get_file_info(newest).mtime
    return None if mtime is None else mtime.timestamp()


def request_experiment_state_save(tune_controller: Any) -> None:
    """Make Tune save its experiment state at the end of its current step, whatever its period.

    Tune saves the state ``--resume`` restores from every 10 s at most (``auto`` period). A
    trial added since the last save is unknown to a resumed sweep, which makes a new trial in
    its place (the lost one's MLflow run and checkpoints left orphaned); a trial that ended
    since is restarted. A scheduler is told of both with the controller (a restricted view
    when a trial is added), and Tune's own per-checkpoint trigger uses this flag.
    """
    controller = getattr(tune_controller, "_tune_controller", tune_controller)
    manager = controller._checkpoint_manager
    assert hasattr(manager, "_should_force_sync_up"), "Tune's experiment checkpoint manager changed"
    manager._should_force_sync_up = True


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
