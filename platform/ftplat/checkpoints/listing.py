"""What a sweep folder holds, as retention sees it: each Train run's checkpoint folders, which
of them hold optimizer state, and Ray's snapshot of them (local path, NFS mount or ``s3://``,
through pyarrow filesystems). Reads only."""

from __future__ import annotations

import dataclasses
import os
import posixpath
from typing import NamedTuple

import pyarrow.fs as pafs

from ftplat.checkpoints.strip import select_strippable
from ftplat.layout import build_train_run_uri, is_checkpoint_folder, parse_train_run_name
from ftplat.ray_internals import SNAPSHOT_FILE, select_snapshot_latest, select_snapshot_names
from ftplat.records import SweepSummary
from ftplat.storage import join_uri, path_exists, resolve_storage


def list_dirs(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(posixpath.basename(i.path) for i in infos if i.type == pafs.FileType.Directory)


def read_text(fs: pafs.FileSystem, path: str) -> str | None:
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as src:
        return src.read().decode("utf-8")


class StorageListing(NamedTuple):
    sweep_uri: str  # absolute
    folders: dict[str, list[str]]  # checkpoint folder names by Train run folder
    tracked: dict[str, set[str]]  # names the run's Ray snapshot tracks
    registered_latest: dict[str, str]  # the latest checkpoint the run's snapshot registers
    strippable: dict[str, set[str]]  # checkpoint names holding optimizer state (``strip.py``)


def _list_checkpoint_folders(fs: pafs.FileSystem, run_path: str) -> dict[str, list[str]]:
    """``{checkpoint folder: paths under it}`` of a Train run, empty folders included, from one
    recursive listing (on object storage each listing is a paged request)."""
    files: dict[str, list[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector(run_path, recursive=True, allow_not_found=True)):
        rel = posixpath.relpath(info.path, run_path).split("/", 1)
        if not is_checkpoint_folder(rel[0]):
            continue
        if len(rel) == 2:
            files.setdefault(rel[0], []).append(rel[1])
        elif info.type == pafs.FileType.Directory:
            files.setdefault(rel[0], [])
    return files


def read_storage_listing(sweep_uri: str) -> StorageListing:
    """What the sweep folder holds now: checkpoint folders (and which hold optimizer state)
    and Ray's snapshots of them."""
    if "://" not in sweep_uri:
        # pyarrow wants absolute local paths; the CLI may be given a relative one.
        sweep_uri = os.path.abspath(os.path.expanduser(sweep_uri))
    fs, root = resolve_storage(sweep_uri)
    folders, tracked, latest, strippable = {}, {}, {}, {}
    for run in list_dirs(fs, root):
        if parse_train_run_name(run) is None:
            continue
        run_path = posixpath.join(root, run)
        files = _list_checkpoint_folders(fs, run_path)
        folders[run] = sorted(files)
        strippable[run] = select_strippable(files)
        snapshot = read_text(fs, posixpath.join(run_path, SNAPSHOT_FILE))
        if snapshot is not None:
            tracked[run] = select_snapshot_names(snapshot)
            if (name := select_snapshot_latest(snapshot)) is not None:
                latest[run] = name
    return StorageListing(sweep_uri, folders, tracked, latest, strippable)


def read_current_checkpoint_existence(summary: SweepSummary, sweep_uri: str | None = None) -> SweepSummary:
    """The summary with each best checkpoint's ``exists`` read again from storage (a retention
    pass may have deleted some since): at its recorded path, or under ``sweep_uri`` when given
    (a sweep copied elsewhere records the original's paths)."""
    def current(trial_id: str, ckpt):
        if ckpt is None:
            return None
        path = join_uri(build_train_run_uri(sweep_uri, trial_id), ckpt.name) if sweep_uri else ckpt.path
        return dataclasses.replace(ckpt, exists=path_exists(path))

    trials = [dataclasses.replace(t, best_checkpoint=current(t.trial_id, t.best_checkpoint)) for t in summary.trials]
    winner = summary.winner and dataclasses.replace(
        summary.winner, best_checkpoint=current(summary.winner.trial_id, summary.winner.best_checkpoint))
    return dataclasses.replace(summary, trials=trials, winner=winner)
