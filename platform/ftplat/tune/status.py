"""How far a sweep is, read from its storage alone (no Ray connection): its status, each
trial's values, evaluations and scope score, the leader, elapsed and remaining time, and the
bytes it holds. ``ftplat sweeps show`` and ``ftplat sweeps list`` print it.

What storage can tell: ``sweep_config.json`` (written at the start), Tune's experiment state
and each trial's ``result.json`` (saved by the sweep driver about every 10 seconds while it
runs), ftplat's per-trial history and training record, and ``summary.json`` once the sweep
has ended. A sweep without a summary is *running* while something in its folder changed
within ``stale_after_s``, else *interrupted* (its driver died: ``--resume`` continues it);
a sweep with a summary is *finished*, or *failed* when no trial produced a score, unless Tune
saved its state after the summary (a ``--resume`` running, or stopped before its end): its
trials are then read live, as ``checkpoints gc`` reads them.

Trials are scored as live retention scores them (``build_live_trial_record``), and the leader
is chosen by the summary's rule (``scoring``): a finite score, ties to the earlier trial.
"""

from __future__ import annotations

import dataclasses
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from ftplat.checkpoints.gc import read_resumed_since_summary
from ftplat.errors import UnreadableSweepError, UserError
from ftplat.layout import build_summary_uri, build_sweep_config_uri
from ftplat.ray_internals import read_torn_tune_state
from ftplat.records import COMPLETED_STATUS, SweepSummary, TrialRecord, clean_value
from ftplat.scoring import compute_history_stats, is_finite_score, rank_by_score, scope_score
from ftplat.storage import join_uri, list_dir_names, path_exists, read_json, resolve_storage
from ftplat.tune.live_trials import TrialTiming, read_live_trials

#: Longer than the sweep driver ever waits between two saves of Tune's state (every 10 s, or
#: 19 times what a save takes) while it runs.
DEFAULT_STALE_AFTER_S = 300.0
RUNNING, FINISHED, FAILED, INTERRUPTED = "running", "finished", "failed", "interrupted"
#: How a trial that no longer runs ended: it trained to its end (and wrote its training
#: record), the scheduler stopped it early, or it failed.
COMPLETED, STOPPED, TRIAL_FAILED = "completed", "stopped", "failed"


@dataclass(frozen=True)
class StorageUsage:
    bytes: int
    files: int
    #: Newest modification time of any file, seconds since the epoch (None: no file).
    last_change: float | None
    #: When ``sweep_config.json`` was written: the sweep's start.
    started_at: float | None


@dataclass(frozen=True)
class TrialProgress:
    trial_id: str
    status: str
    hyperparameters: dict[str, Any]
    num_evaluations: int
    score: float | None
    best: float | None
    duration_s: float | None
    ended: str | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "status": self.status, "hyperparameters": self.hyperparameters,
                "num_evaluations": self.num_evaluations, "score": clean_value(self.score),
                "best": clean_value(self.best), "duration_s": _round(self.duration_s), "ended": self.ended,
                "error": self.error}


@dataclass
class SweepStatus:
    name: str
    path: str
    status: str
    metric: str
    mode: str
    scope: str
    num_samples: int
    trials: list[TrialProgress]
    leader: str | None
    elapsed_s: float | None
    remaining_s: float | None
    storage_bytes: int
    storage_files: int
    last_change: float | None
    errors: list[str] = field(default_factory=list)

    @property
    def trials_done(self) -> int:
        return sum(1 for t in self.trials if t.ended is not None)

    def leader_trial(self) -> TrialProgress | None:
        return next((t for t in self.trials if t.trial_id == self.leader), None)

    def to_dict(self) -> dict[str, Any]:
        leader = self.leader_trial()
        return {"name": self.name, "path": self.path, "status": self.status,
                "objective": {"metric": self.metric, "mode": self.mode}, "scope": self.scope,
                "num_samples": self.num_samples, "trials_done": self.trials_done,
                "trials_running": sum(1 for t in self.trials if t.status == "RUNNING"),
                "leader": leader.to_dict() if leader else None, "elapsed_s": _round(self.elapsed_s),
                "remaining_s": _round(self.remaining_s), "storage_bytes": self.storage_bytes,
                "storage_files": self.storage_files, "last_change": self.last_change, "errors": self.errors,
                "trials": [t.to_dict() for t in self.trials]}


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def build_trial_progress(record: TrialRecord, timing: TrialTiming, *, metric: str, mode: str, scope: str,
                         now: float) -> TrialProgress:
    """One trial as storage shows it; ``record`` carries its history and its ``scope`` score."""
    stats = compute_history_stats(record.history, metric)
    ended = None
    if record.status == "ERROR":
        ended = TRIAL_FAILED
    elif record.status == "TERMINATED":
        ended = COMPLETED if timing.completed else STOPPED
    duration = timing.time_total_s
    if record.status == "RUNNING" and timing.started_at is not None:
        duration = max(now - timing.started_at, duration or 0.0)
    return TrialProgress(trial_id=record.trial_id, status=record.status, hyperparameters=record.hyperparameters,
                         num_evaluations=record.num_evaluations, score=record.scores.get(scope),
                         best=scope_score(stats, "all", mode), duration_s=duration, ended=ended,
                         error=record.error)


def build_leader(trials: list[TrialProgress], mode: str) -> str | None:
    """The trial with the best finite score (ties: a completed trial, then the earlier), as the
    winner is chosen."""
    if not trials:
        return None
    first = rank_by_score([t.score for t in trials], mode, [t.status == COMPLETED_STATUS for t in trials])[0]
    return trials[first].trial_id if is_finite_score(trials[first].score) else None


def build_remaining_s(trials: list[TrialProgress], num_samples: int, max_concurrent: int | None) -> float | None:
    """Seconds until the last trial ends, guessed from the mean duration of the trials done:
    what the running ones have left plus the trials not started, shared by the trials that
    run at once. None until a trial is done."""
    done = [t.duration_s for t in trials if t.ended is not None and t.duration_s is not None]
    if not done:
        return None
    mean = sum(done) / len(done)
    running = [t for t in trials if t.ended is None and t.status == "RUNNING"]
    waiting = max(num_samples - sum(1 for t in trials if t.ended is not None) - len(running), 0)
    work = sum(max(mean - (t.duration_s or 0.0), 0.0) for t in running) + waiting * mean
    slots = max(1, max_concurrent) if max_concurrent else max(1, len(running))
    return work / slots


def build_sweep_status(*, name: str, path: str, config: dict, records: list[TrialRecord],
                       timings: dict[str, TrialTiming], usage: StorageUsage, summary: SweepSummary | None,
                       now: float, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> SweepStatus:
    """The status of a sweep from what its storage holds (``records`` in creation order)."""
    space, job = config["search_space"], config["job"]
    metric, mode, scope = space["objective"]["metric"], space["objective"]["mode"], space["scope"]
    trials = [build_trial_progress(r, timings.get(r.trial_id, TrialTiming()), metric=metric, mode=mode, scope=scope,
                                   now=now) for r in records]
    errors: list[str] = []
    if summary is not None:
        status = FINISHED if summary.winner else FAILED
        leader = summary.winner.trial_id if summary.winner else None
        errors = [f"{what}: {e}" for what, e in (("retention", summary.retention_error),
                                                 ("tracking", summary.tracking_error),
                                                 ("test score", (summary.test or {}).get("error"))) if e]
    else:
        fresh = usage.last_change is not None and now - usage.last_change <= stale_after_s
        status = RUNNING if fresh else INTERRUPTED
        leader = build_leader(trials, mode)
    started = min([t for t in (usage.started_at, *(x.started_at for x in timings.values())) if t is not None],
                  default=None)
    end = now if status == RUNNING else usage.last_change
    elapsed = summary.wall_seconds if summary is not None and summary.wall_seconds is not None else (
        end - started if started is not None and end is not None else None)
    remaining = build_remaining_s(trials, space["num_samples"], job["resources"].get("max_concurrent_trials")) \
        if status == RUNNING else (0.0 if summary is not None else None)
    return SweepStatus(name=name, path=path, status=status, metric=metric, mode=mode, scope=scope,
                       num_samples=space["num_samples"], trials=trials, leader=leader, elapsed_s=elapsed,
                       remaining_s=remaining, storage_bytes=usage.bytes, storage_files=usage.files,
                       last_change=usage.last_change, errors=errors)


# --- readers ------------------------------------------------------------------------------

def read_storage_usage(sweep_uri: str, attempts: int = 3) -> StorageUsage:
    """Bytes and files under the sweep folder, its newest change and its start."""
    fs, path = resolve_storage(sweep_uri)
    config_path = resolve_storage(build_sweep_config_uri(sweep_uri))[1]
    for attempt in range(attempts):
        try:
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            break
        except FileNotFoundError:  # live retention deleted a folder while it was listed
            if attempt == attempts - 1:
                raise
    files = [i for i in infos if i.type == pafs.FileType.File]
    times = {i.path: i.mtime.timestamp() for i in files if i.mtime is not None}
    return StorageUsage(bytes=sum(i.size or 0 for i in files), files=len(files),
                        last_change=max(times.values(), default=None), started_at=times.get(config_path))


#: What an unreadable sweep's message names while Tune's files are read.
TUNE_STATE_READING = "Tune's experiment state or a trial's results: "


def read_sweep_status(sweep_uri: str, *, now: float | None = None,
                      stale_after_s: float = DEFAULT_STALE_AFTER_S) -> SweepStatus:
    """The status of the sweep folder ``sweep_uri``; ``UserError`` when it is not one, and
    ``UnreadableSweepError`` when a file in it is cut short (a copy still being written), is not
    what ftplat writes, or storage refuses to read it: one such sweep must not fail a listing."""
    config_uri = build_sweep_config_uri(sweep_uri)
    if not path_exists(config_uri):
        raise UserError(f"SWEEP {sweep_uri!r} is not an ftplat sweep folder (it has no "
                        f"{posixpath.basename(config_uri)}); `ftplat sweeps list STORAGE` lists the sweeps")
    reading = f"{posixpath.basename(config_uri)}: "
    try:
        config = read_json(config_uri)
        if not (isinstance(config, dict) and all(isinstance(config.get(k), dict) for k in ("job", "search_space"))):
            raise UnreadableSweepError(sweep_uri, f"{reading}not an ftplat sweep config (no job and search_space)")
        reading = ""
        now = time.time() if now is None else now
        usage = read_storage_usage(sweep_uri)
        # A summary older than Tune's saved state is a --resume's (running, or stopped before
        # its end): the trials are read live, as gc plans them, not as "finished".
        reading = f"{posixpath.basename(build_summary_uri(sweep_uri))}: "
        summary = (SweepSummary.read(sweep_uri) if path_exists(build_summary_uri(sweep_uri))
                   and not read_resumed_since_summary(sweep_uri) else None)
        reading = TUNE_STATE_READING
        records, timings = read_live_trials(sweep_uri, config)
        reading = ""
        if summary is not None:
            records = summary.trials
            # The summary is the sweep's record; Tune's state adds only when each trial ran.
            for rec in records:
                known = timings.get(rec.trial_id) or TrialTiming(
                    time_total_s=(rec.train_result or {}).get("train_runtime"))
                timings[rec.trial_id] = dataclasses.replace(known, completed=rec.train_result is not None)
        # The folder's name, which `sweeps show NAME --storage ROOT` finds (a copied or renamed
        # sweep keeps the name it ran under in its config).
        name = posixpath.basename(sweep_uri.rstrip("/"))
        return build_sweep_status(name=name, path=sweep_uri, config=config, records=records, timings=timings,
                                  usage=usage, summary=summary, now=now, stale_after_s=stale_after_s)
    except UserError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # The file a reader must look at: Tune's state torn by a full disk read as a bare JSON error.
        torn = read_torn_tune_state(sweep_uri) if reading == TUNE_STATE_READING else None
        if torn:
            raise UnreadableSweepError(sweep_uri, f"Tune's state {torn}") from None
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), None)
        detail = f" ({first[:300]})" if first else ""
        raise UnreadableSweepError(sweep_uri, f"{reading}{type(exc).__name__}{detail}") from None


def read_sweep_names(storage_uri: str) -> list[str]:
    """The sweep folders directly under a storage root (those with a sweep config)."""
    return [n for n in list_dir_names(storage_uri)
            if path_exists(build_sweep_config_uri(join_uri(storage_uri, n)))]
