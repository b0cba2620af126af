"""Dropping the optimizer state from checkpoints no resume can need (part of retention).

A checkpoint holds the model and, for a resume, the optimizer's moments (twice the model's
bytes with AdamW), the scheduler and the AMP scaler. Once a trial has *completed* (Tune's
TERMINATED: trained to its end, or stopped by the scheduler) nothing resumes it: ``--resume``
restarts only unfinished and failed trials. Its kept checkpoints then serve export, test
scoring and the card, none of which reads that state, so a completed trial keeps about its
model's size instead of three times it (``retention.keep_optimizer_state: false``).

Left whole: checkpoints of running and failed trials (a resume needs them), and DeepSpeed
checkpoints (their ``global_step*`` shards can hold the only full copy of the weights, which
export consolidates from).
"""

from __future__ import annotations

import posixpath

import pyarrow.fs as pafs

from ftplat.storage import resolve_storage

#: Files a resume reads and export never does: optimizer, scheduler and AMP scaler state.
RESUME_ONLY_FILES = frozenset({"optimizer.pt", "optimizer.bin", "scheduler.pt", "scaler.pt"})


def select_strippable(files_by_checkpoint: dict[str, list[str]]) -> set[str]:
    """Checkpoint names with resume-only files, DeepSpeed checkpoints left out.

    ``files_by_checkpoint`` maps a checkpoint folder name to the paths under it, relative to it.
    """
    out = set()
    for name, paths in files_by_checkpoint.items():
        if any(p.startswith("global_step") for p in paths):
            continue
        if any(p in RESUME_ONLY_FILES for p in paths):
            out.add(name)
    return out


def run_strip_checkpoint(uri: str) -> list[str]:
    """Delete the resume-only files of one checkpoint folder; return the names deleted.
    Idempotent: a folder already stripped is left as it is."""
    fs, path = resolve_storage(uri)
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    deleted = []
    for info in infos:
        name = posixpath.basename(info.path)
        if info.type == pafs.FileType.File and name in RESUME_ONLY_FILES:
            fs.delete_file(info.path)
            deleted.append(name)
    return sorted(deleted)
