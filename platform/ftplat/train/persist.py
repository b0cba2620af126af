"""Putting a saved checkpoint into the run's Ray storage without copying it, where that is safe.

Ray's upload copies the checkpoint folder (model and optimizer state: about 3x the model)
from the node's scratch folder into storage while the training loop waits. When storage is a
local or NFS path on the *same filesystem* as the scratch folder (the default set-up: scratch
in the temp folder, storage under the home folder of one machine), each file is hard-linked
instead: no bytes are written, the loop waits under a millisecond instead of the copy's
tenths of a second (seconds for GB-sized checkpoints), and the two
names share one copy on disk until the scratch folder is removed.

Hard links are safe here because nothing writes into a saved checkpoint's files again: the
Trainer saves each checkpoint into a new folder and its rotation only unlinks; a restarted
worker removes its predecessor's scratch before training (``run_clear_stale_scratch``); and
retention only deletes files in storage. Anything else (S3, storage on another device, a
folder that is not the cluster's storage, a filesystem refusing links) goes through Ray's own
copy, after removing any link this call made (a copy onto a link would write
through to the scratch file it is copying from).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pyarrow.fs as pafs
import ray.train

from ftplat.ray_internals import RunStorage, read_run_storage

logger = logging.getLogger(__name__)


@dataclass
class PersistCounts:
    """How a worker's checkpoints reached storage (in its result record)."""

    linked: int = 0
    copied: int = 0
    #: Why the last copy was not a link.
    copy_reason: str | None = None

    def to_dict(self) -> dict:
        return {"linked": self.linked, "copied": self.copied, "copy_reason": self.copy_reason}


def build_link_refusal(source: str, storage: RunStorage) -> str | None:
    """Why the checkpoint folder ``source`` cannot be hard-linked into the run's storage; None
    when it can (a local filesystem whose run folder this node sees, on the source's device,
    and no symbolic links in the checkpoint)."""
    if not isinstance(storage.filesystem, pafs.LocalFileSystem):
        return f"storage is {type(storage.filesystem).__name__}, not a local path"
    if not storage.node_sees_run_dir():
        return "this node does not see the run's storage folder"
    if os.stat(source).st_dev != os.stat(storage.run_dir).st_dev:
        return "storage is on another filesystem than the scratch folder"
    for root, dirs, files in os.walk(source):
        if any(os.path.islink(os.path.join(root, name)) for name in dirs + files):
            return "the checkpoint holds symbolic links"
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
    """``ray.train.report``'s ``checkpoint_upload_fn``: a link where ``build_link_refusal``
    allows one, Ray's copy otherwise."""

    def __init__(self):
        self.counts = PersistCounts()

    def __call__(self, checkpoint: ray.train.Checkpoint, checkpoint_dir_name: str) -> ray.train.Checkpoint:
        storage = read_run_storage()
        reason = build_link_refusal(checkpoint.path, storage)
        if reason is None:
            dest = storage.checkpoint_path(checkpoint_dir_name)
            try:
                run_link_tree(checkpoint.path, dest)
            except OSError as exc:
                reason = f"linking failed: {exc}"
            else:
                self.counts.linked += 1
                return ray.train.Checkpoint(path=dest, filesystem=storage.filesystem)
        if reason != self.counts.copy_reason:
            logger.info("Checkpoints are copied into storage: %s", reason)
        self.counts.copied += 1
        self.counts.copy_reason = reason
        return storage.copy_checkpoint(checkpoint, checkpoint_dir_name)
