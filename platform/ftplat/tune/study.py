"""The Optuna study of a sweep, kept as a SQLite file in the sweep folder for ``optuna-dashboard``.

Ray's ``OptunaSearch`` tells the study each trial's intermediate and final objective (the scope
score), so the file holds the whole search: history, parameters and, through the dashboard,
their importances. SQLite needs a local file: on local or NFS storage the study lives in the
sweep folder itself; on object storage (``s3://``) it lives in a local folder on the driver and
a copy is uploaded to the sweep folder after every trial and at the end of the sweep.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import tempfile

import optuna
import pyarrow.fs as pafs
from ray import tune

from ftplat.storage import join_uri, path_exists, resolve_storage

logger = logging.getLogger(__name__)

#: The study's file name in the sweep folder.
STUDY_FILE = "optuna_study.db"


def build_study_uri(sweep_path: str) -> str:
    return join_uri(sweep_path, STUDY_FILE)


def is_local_storage(uri: str) -> bool:
    # By the scheme, not by resolving: resolving an s3:// URI contacts the bucket.
    return "://" not in uri or uri.startswith("file://")


def build_local_study_path(sweep_path: str) -> str:
    """Where the driver's SQLite file lives: in the sweep folder when that is a local path,
    else in a temporary folder named after the sweep (the same path on every driver, so a
    resumed sweep's searcher, which Tune restores with this path inside, finds its study)."""
    if is_local_storage(sweep_path):
        return resolve_storage(build_study_uri(sweep_path))[1]
    digest = hashlib.sha256(sweep_path.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), "ftplat-optuna", f"{posixpath.basename(sweep_path)}-{digest}",
                        STUDY_FILE)


def run_open_study_storage(sweep_path: str) -> optuna.storages.RDBStorage:
    """The study's SQLite storage on the driver's disk (its folder and file created)."""
    local = build_local_study_path(sweep_path)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    return optuna.storages.RDBStorage(f"sqlite:///{local}")


def build_dashboard_command(sweep_path: str) -> str:
    """What a user runs to open the study (on object storage: after downloading the file)."""
    if is_local_storage(sweep_path):
        return f"optuna-dashboard sqlite:///{build_local_study_path(sweep_path)}"
    return f"optuna-dashboard sqlite:///{STUDY_FILE}  (after downloading {build_study_uri(sweep_path)})"


def run_clear_stale_study(sweep_path: str) -> None:
    """Before a new sweep on object storage: remove the driver's file an earlier sweep of the
    same URI left (deleted from the bucket and run again), whose trials Optuna would otherwise
    load into the new study. A local sweep folder is new by then (preflight refuses one that exists)."""
    if is_local_storage(sweep_path):
        return
    local = build_local_study_path(sweep_path)
    if os.path.exists(local):
        logger.info("Removing the Optuna study an earlier sweep of %s left on this driver: %s", sweep_path, local)
        os.remove(local)


def run_upload_study(sweep_path: str) -> None:
    """Copy the driver's study file to the sweep folder on object storage (no-op when local)."""
    if is_local_storage(sweep_path):
        return
    local = build_local_study_path(sweep_path)
    if not os.path.exists(local):
        return
    fs, path = resolve_storage(build_study_uri(sweep_path))
    fs.create_dir(posixpath.dirname(path), recursive=True)
    pafs.copy_files(local, path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def run_download_study(sweep_path: str) -> None:
    """Before resuming a sweep on object storage: the driver's study file from the sweep folder,
    when this driver does not hold it (a new head node)."""
    local = build_local_study_path(sweep_path)
    if is_local_storage(sweep_path) or os.path.exists(local) or not path_exists(build_study_uri(sweep_path)):
        return
    os.makedirs(os.path.dirname(local), exist_ok=True)
    fs, path = resolve_storage(build_study_uri(sweep_path))
    pafs.copy_files(path, local, source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())


class StudyUploadCallback(tune.Callback):
    """Keeps the sweep folder's copy of the study current on object storage."""

    def __init__(self, sweep_path: str):
        self.sweep_path = sweep_path

    def _upload(self) -> None:
        try:
            run_upload_study(self.sweep_path)
        except Exception as exc:  # the study copy is a convenience: never fail the sweep for it
            logger.warning("Could not copy the Optuna study to %s: %s", build_study_uri(self.sweep_path), exc)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        self._upload()

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        self._upload()

    def on_experiment_end(self, trials: list, **info) -> None:
        self._upload()
