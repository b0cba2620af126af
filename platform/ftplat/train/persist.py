"""Putting a saved checkpoint into the run's Ray storage without the training loop waiting
for a copy.

Ray's upload copies the checkpoint folder (model and optimizer state: about 3x the model)
from the node's scratch folder into storage while the training loop waits. Instead:
- When storage is a local or NFS path on the *same filesystem* as the scratch folder (the
  default set-up: scratch in the temp folder, storage under the home folder of one machine),
  each file is hard-linked into storage: no bytes are written, the loop waits under a
  millisecond instead of the copy's tenths of a second (seconds for GB-sized checkpoints),
  and the two names share one copy on disk until the scratch folder is removed.
- When storage is elsewhere (S3, an NFS mount beside a local scratch disk), the folder is
  hard-linked into a staging folder inside the scratch folder and Ray copies *that* in the
  background (``CheckpointUploadMode.ASYNC``), deleting it when done: training goes on at once,
  and the Trainer's rotation may delete its own folder meanwhile without touching the staged
  files. Ray still reports each evaluation in order, once its checkpoint is in storage (what
  retention, ASHA and the summary see is unchanged), and a worker waits for its uploads
  before it removes the scratch folder (``run_wait_for_checkpoint_uploads``).

Hard links are safe because nothing writes into a saved checkpoint's files again: the Trainer
saves each checkpoint into a new folder and its rotation only unlinks; a restarted worker
removes its predecessor's scratch before training (``run_clear_stale_scratch``); retention
only deletes files in storage, and Ray only reads the staged ones. Where a link fails, Ray's
own copy runs, after the links made are removed (a copy onto a link would write through to the
scratch file it is copying from); a node that does not see a local storage folder, or a
checkpoint holding symbolic links, gets Ray's copy in the loop.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow.fs as pafs
import ray.train
from ray.train import CheckpointUploadMode

from ftplat.ray_internals import RunStorage, read_run_storage

logger = logging.getLogger(__name__)


#: Beside the Trainer's ``checkpoint-*`` folders in the scratch folder (its rotation and
#: resume never look at it): the links Ray uploads from in the background.
STAGING_DIR = ".uploads"


@dataclass
class PersistCounts:
    """How a worker's checkpoints reached storage (in its result record)."""

    linked: int = 0
    #: Copies by Ray, those in the background included.
    copied: int = 0
    copied_in_background: int = 0
    #: Why the last copy was not a link.
    copy_reason: str | None = None

    def to_dict(self) -> dict:
        return {"linked": self.linked, "copied": self.copied, "copied_in_background": self.copied_in_background,
                "copy_reason": self.copy_reason}


class LinkRefusal(NamedTuple):
    """Why a checkpoint cannot be hard-linked into storage; ``background``: Ray can copy it in
    the background instead (storage that this node writes to, just not by a link)."""

    reason: str
    background: bool


def read_device(path: str) -> int:
    """The device (filesystem) a path is on: a hard link cannot leave it."""
    return os.stat(path).st_dev


def build_link_refusal(source: str, storage: RunStorage) -> LinkRefusal | None:
    """Why the checkpoint folder ``source`` cannot be hard-linked into the run's storage; None
    when it can (a local filesystem whose run folder this node sees, on the source's device,
    and no symbolic links in the checkpoint)."""
    for root, dirs, files in os.walk(source):
        if any(os.path.islink(os.path.join(root, name)) for name in dirs + files):
            return LinkRefusal("the checkpoint holds symbolic links", background=False)
    if not isinstance(storage.filesystem, pafs.LocalFileSystem):
        return LinkRefusal(f"storage is {type(storage.filesystem).__name__}, not a local path", background=True)
    if not storage.node_sees_run_dir():
        # Ray's copy raises Ray's own error about storage the nodes do not share, at once.
        return LinkRefusal("this node does not see the run's storage folder", background=False)
    if read_device(source) != read_device(storage.run_dir):
        return LinkRefusal("storage is on another filesystem than the scratch folder", background=True)
    return None


def run_link_tree(source: str, dest: str) -> list[str]:
    """Hard-link every file under ``source`` to the same place under ``dest``; return the
    links made. An existing file at a destination is replaced atomically (a link to a temp
    name, then a rename), as a copy would overwrite it. On an error, the links made so far
    are removed again before it is raised."""
    made: list[str] = []
    try:
        for root, _dirs, files in os.walk(source):
            target_dir = os.path.join(dest, os.path.relpath(root, source))
            os.makedirs(target_dir, exist_ok=True)
            for name in files:
                src, dst = os.path.join(root, name), os.path.join(target_dir, name)
                if os.path.exists(dst) and os.path.samefile(src, dst):
                    continue
                tmp = f"{dst}.link-{os.getpid()}"
                os.link(src, tmp)
                made.append(tmp)
                os.replace(tmp, dst)
                made[-1] = dst
    except OSError:
        for path in made:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return made


class CheckpointPersister:
    """How each saved checkpoint goes to storage: a link, a background copy from staged links,
    or Ray's copy (``build_report_args``)."""

    def __init__(self):
        self.counts = PersistCounts()

    def build_report_args(self, local_dir: str, checkpoint_dir_name: str) -> dict[str, Any]:
        """``ray.train.report``'s checkpoint arguments for the folder the Trainer just saved."""
        storage = read_run_storage()
        refusal = build_link_refusal(local_dir, storage)
        if refusal is None:
            return {"checkpoint": ray.train.Checkpoint.from_directory(local_dir),
                    "checkpoint_upload_fn": self.run_link_or_copy}
        if refusal.background:
            staged = os.path.join(os.path.dirname(local_dir), STAGING_DIR, checkpoint_dir_name)
            try:
                run_link_tree(local_dir, staged)
            except OSError as exc:
                refusal = LinkRefusal(f"{refusal.reason}; staging failed: {exc}", background=False)
            else:
                self._count_copy(refusal.reason, background=True)
                return {"checkpoint": ray.train.Checkpoint.from_directory(staged),
                        "checkpoint_upload_mode": CheckpointUploadMode.ASYNC,
                        "delete_local_checkpoint_after_upload": True}
        self._count_copy(refusal.reason, background=False)
        return {"checkpoint": ray.train.Checkpoint.from_directory(local_dir)}

    def run_link_or_copy(self, checkpoint: ray.train.Checkpoint, checkpoint_dir_name: str) -> ray.train.Checkpoint:
        """``checkpoint_upload_fn`` of a checkpoint ``build_link_refusal`` allowed to link."""
        storage = read_run_storage()
        dest = storage.checkpoint_path(checkpoint_dir_name)
        try:
            run_link_tree(checkpoint.path, dest)
        except OSError as exc:
            self._count_copy(f"linking failed: {exc}", background=False)
            return storage.copy_checkpoint(checkpoint, checkpoint_dir_name)
        self.counts.linked += 1
        return ray.train.Checkpoint(path=dest, filesystem=storage.filesystem)

    def _count_copy(self, reason: str, *, background: bool) -> None:
        if reason != self.counts.copy_reason:
            logger.info("Checkpoints are copied into storage%s: %s", " in the background" if background else "",
                        reason)
        self.counts.copied += 1
        self.counts.copied_in_background += background
        self.counts.copy_reason = reason
