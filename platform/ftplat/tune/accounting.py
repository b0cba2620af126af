"""What a sweep cost: reserved compute-seconds and storage bytes, per trial and for the sweep.

Compute is counted as a cluster bills it: the CPUs and GPUs a trial reserves (its driver and
its workers, as scheduled) times the seconds it held them, whether it kept them busy or not.
Storage is what the sweep folder holds once the final retention pass has run, per trial (its
Train run folder) and in all (with Tune's state, the summary and the Optuna study).
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any

import pyarrow.fs as pafs

from ftplat.config.loading import build_trial_job
from ftplat.config.schema import JobConfig
from ftplat.records import COMPLETED_STATUS, SweepSummary, TrialRecord
from ftplat.storage import resolve_storage
from ftplat.units import format_bytes


def build_trial_reservation(job: JobConfig, hyperparameters: dict[str, Any]) -> tuple[float, float]:
    """``(cpus, gpus)`` one trial holds: its driver and its workers, with its own values
    applied (``resources.*`` can be searched like any field)."""
    if any(k.startswith("resources.") for k in hyperparameters):
        job = JobConfig.model_validate(build_trial_job(job.model_dump(), hyperparameters))
    r = job.resources
    gpus = r.num_workers * r.gpus_per_worker if r.use_gpu else 0.0
    return r.trial_driver_cpus + r.num_workers * r.cpus_per_worker, gpus


def build_trial_cost(*, wall_s: float | None, cpus: float, gpus: float) -> dict[str, Any]:
    """The trial's reservation and its compute-seconds; None seconds when its time is unknown
    (a trial that never reported)."""
    def seconds(n: float) -> float | None:
        return None if wall_s is None else round(wall_s * n, 1)

    return {"wall_s": None if wall_s is None else round(wall_s, 1), "cpus": cpus, "gpus": gpus,
            "cpu_seconds": seconds(cpus), "gpu_seconds": seconds(gpus)}


def select_trial_wall(train_result: dict[str, Any] | None, time_total_s: float | None) -> float | None:
    """The trial driver's own wall time when it finished (from start to its record written),
    else Tune's time until the trial's last result (a trial ASHA stopped or that failed)."""
    wall = (train_result or {}).get("driver_wall_s")
    return float(wall) if wall is not None else time_total_s


def read_folder_bytes(sweep_path: str) -> tuple[dict[str, int], int, int]:
    """Bytes under each top-level folder of the sweep, the sweep's bytes and its file count
    (one recursive listing: one request per thousand keys on S3)."""
    fs, root = resolve_storage(sweep_path)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    by_folder: dict[str, int] = {}
    total = files = 0
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        size = info.size or 0
        total, files = total + size, files + 1
        top = posixpath.relpath(info.path, root).split("/", 1)
        if len(top) == 2:
            by_folder[top[0]] = by_folder.get(top[0], 0) + size
    return by_folder, total, files


def build_sweep_cost(summary: SweepSummary, by_folder: dict[str, int], total_bytes: int,
                     files: int) -> SweepSummary:
    """The summary with each trial's ``storage_bytes`` and the sweep's ``cost``: the trials'
    compute-seconds summed, and the sweep folder's bytes and files."""
    def with_storage(t: TrialRecord) -> TrialRecord:
        folder = posixpath.basename((t.train_run_path or "").rstrip("/"))
        stored = by_folder.get(folder, 0)
        model = ((t.train_result or {}).get("checkpoint_bytes") or {}).get("model")
        ratio = {"storage_vs_model": round(stored / model, 3)} if model else {}
        return dataclasses.replace(t, cost={**(t.cost or {}), "storage_bytes": stored, **ratio})

    trials = [with_storage(t) for t in summary.trials]

    def total(key: str) -> float:
        return round(sum((t.cost or {}).get(key) or 0.0 for t in trials), 1)

    cost = {"cpu_seconds": total("cpu_seconds"), "gpu_seconds": total("gpu_seconds"),
            "trial_wall_s": total("wall_s"), "storage_bytes": total_bytes, "storage_files": files}
    ratios = [t.cost["storage_vs_model"] for t in trials if t.status == COMPLETED_STATUS and "storage_vs_model" in t.cost]
    if ratios:
        # How many model copies a completed trial keeps (goal: about 1 with one checkpoint).
        cost["completed_storage_vs_model_max"] = max(ratios)
    return dataclasses.replace(summary, trials=trials, cost=cost)


def format_sweep_cost_line(summary: SweepSummary) -> str | None:
    cost = summary.cost
    if not cost:
        return None
    gpu = f" and {cost['gpu_seconds']:,.0f} GPU-s" if cost.get("gpu_seconds") else ""
    copies = cost.get("completed_storage_vs_model_max")
    per_trial = f" (a completed trial at most {copies:.1f}x its model)" if copies else ""
    return (f"  cost: {cost['cpu_seconds']:,.0f} CPU-s{gpu} reserved by {len(summary.trials)} trial(s) "
            f"({cost['trial_wall_s']:,.0f} s of trials); {format_bytes(cost['storage_bytes'])} in "
            f"{cost['storage_files']:,} files kept in storage{per_trial}")
