"""Applying a ``RetentionPolicy`` to a sweep in storage: ``ftplat checkpoints gc SWEEP``.

Reads the sweep folder (``ftplat.layout``; local path, NFS mount or ``s3://``, all through
pyarrow filesystems, listed by ``checkpoints/listing.py``): ``summary.json`` for the trials,
statuses, scores and histories, each Train run's checkpoint folders, and each run's Ray
snapshot of tracked checkpoints.

The kept set comes from ``retention.select_sweep_partition`` over the trials' histories
(every reported checkpoint, deleted or not, so re-running gc is idempotent). On top of it:

* A trial whose history cannot be read completely now (``history_known`` false: after a resume,
  a finished trial whose Trainer state is unreadable) loses nothing: a later pass decides.
* A running trial keeps the latest checkpoint its Ray snapshot registers (its restore point),
  whatever newer folder names say: a newer folder can be an upload the driver's death cut short.
* A checkpoint folder no history row names and the run's Ray snapshot does not track is an
  orphan (an ASHA-stopped trial leaves these, and so does a crash between a snapshot rewrite
  and its deletions): deleted when its trial has finished, kept while it runs, since it may be
  an upload whose report has not reached the summary yet. A folder the snapshot tracks was
  reported: when no history row names it, the history is what lacks it (a ``summary.json``
  older than a resumed run), so it is kept.
* ``ftplat checkpoints gc`` deletes nothing of a running trial; what the policy would remove is
  listed as ``defer``. Its Train controller holds the checkpoint list in memory and rewrites the
  snapshot from it on every report, so a folder deleted under it comes back in the snapshot and
  would make the next restore of that run fail. The sweep driver itself does delete there
  (``delete_running=True``, after every evaluation, see ``tune/live_retention.py``) because the
  trial driver repairs the run's snapshot (``run_repair_snapshot``) before every restore.
  Which trials run it reads from ``summary.json``; when Tune saved its state after that file
  (a ``--resume`` is running or died), the statuses are stale and everything is deferred
  (``read_resumed_since_summary``).
* A completed trial's kept checkpoints lose their optimizer state (``strip-state``, see
  ``checkpoints/strip.py``) unless the policy keeps it: nothing resumes such a trial.
* Before deleting checkpoints a finished trial's snapshot tracks, the snapshot is rewritten
  without them (``build_pruned_snapshot``), so ``Result.from_path`` and a restore of the run
  still work: Ray's ``_assert_checkpoints_exist`` refuses a snapshot naming a missing folder.
  Rewrite first, delete second (Ray's own order): a crash in between leaves untracked folders,
  which the next gc removes as orphans, never a snapshot naming a deleted folder.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import NamedTuple

from ftplat.checkpoints.listing import list_dirs, read_storage_listing, read_text
from ftplat.checkpoints.retention import (
    CheckpointInfo,
    RetentionPolicy,
    TrialCheckpoints,
    select_sweep_partition,
)
from ftplat.checkpoints.strip import run_strip_checkpoint
from ftplat.errors import UserError
from ftplat.layout import build_summary_uri, parse_checkpoint_step, parse_train_run_name
from ftplat.ray_internals import (SNAPSHOT_FILE, build_pruned_snapshot, read_experiment_state_mtime,
                                  read_newest_experiment_state, select_snapshot_names)
from ftplat.records import CHECKPOINT_NAME_KEY, COMPLETED_STATUS, SweepSummary, TrialRecord
from ftplat.storage import join_uri, read_json, resolve_storage, run_write_text_atomically

KEEP, DELETE, DEFER, PRUNE_SNAPSHOT, STRIP_STATE = "keep", "delete", "defer", "prune-snapshot", "strip-state"


class GcAction(NamedTuple):
    """One line of a gc plan: a checkpoint folder (or a trial's snapshot) and what to do."""

    path: str
    action: str
    reason: str


def build_trial_checkpoints(record: TrialRecord, *, metric_for_best_model: str, scope: str,
                            history_known: bool = True) -> TrialCheckpoints:
    """A trial's reported checkpoints, status and scope score, as the retention policy sees them.

    A checkpoint reported twice (a restarted trial overwrites the folder) takes its last row.
    ``history_known`` is false when the record's history may lack evaluations (see ``gc``'s
    module docstring: nothing of such a trial is deleted).
    """
    rows = {row[CHECKPOINT_NAME_KEY]: row for row in record.history if row.get(CHECKPOINT_NAME_KEY)}
    checkpoints = []
    for name, row in rows.items():
        step = parse_checkpoint_step(name)
        step = row.get("step") if step is None else step
        if step is None:
            raise UserError(f"trial {record.trial_id}: no step for checkpoint {name!r} in summary.json")
        value = row.get(metric_for_best_model)
        checkpoints.append(CheckpointInfo(name, step, None if value is None else float(value)))
    return TrialCheckpoints(trial_id=record.trial_id, checkpoints=checkpoints, running=not record.finished,
                            scope_score=record.scores.get(scope), history_known=history_known,
                            completed=record.status == COMPLETED_STATUS)


def build_trials_from_summary(summary: SweepSummary) -> list[TrialCheckpoints]:
    """Every trial of the summary as the retention policy sees it, in the summary's order."""
    return [build_trial_checkpoints(rec, metric_for_best_model=summary.metric_for_best_model, scope=summary.scope)
            for rec in summary.trials]


def _folder_order(name: str) -> tuple[int, str]:
    step = parse_checkpoint_step(name)
    return (-1 if step is None else step, name)


def _select_folder_action(
    trial: TrialCheckpoints, name: str, kept: dict, deleted: dict, delete_running: bool, registered_latest: str | None,
    tracked: set[str],
) -> tuple[str, str]:
    """(action, reason) for one checkpoint folder of a trial named in the summary."""
    key = (trial.trial_id, name)
    if not trial.history_known:
        return KEEP, "the trial's history cannot be read now: nothing of it is deleted until it can"
    if key in kept:
        return KEEP, kept[key]
    if trial.running and name == registered_latest:
        # A newer folder can be an upload cut short; a restore resumes from this one.
        return KEEP, "latest checkpoint registered in the run's snapshot: the running trial's restore point"
    if key not in deleted and name in tracked:
        # Ray registered it, so it was reported: the history that does not name it is the
        # one missing something (a stale summary, a resumed trial), and its score is unknown.
        return KEEP, "tracked in the run's snapshot but named by no evaluation in the history: kept until one names it"
    if not trial.running:
        return DELETE, deleted.get(key, "orphan, not tracked")
    if key in deleted:
        if delete_running:
            return DELETE, f"{deleted[key]}; the trial is running"
        return DEFER, f"{deleted[key]}; the trial is still running"
    return KEEP, "not reported yet: the running trial may still be uploading it"


def select_gc_plan(
    trials: Sequence[TrialCheckpoints],
    folders: dict[str, list[str]],
    tracked: dict[str, set[str]],
    policy: RetentionPolicy,
    *,
    mode: str,
    greater_is_better: bool,
    winner_trial_id: str | None,
    sweep_uri: str,
    delete_running: bool = False,
    registered_latest: dict[str, str] | None = None,
    strippable: dict[str, set[str]] | None = None,
) -> list[GcAction]:
    """The plan for listed storage, in the order ``run_gc_plan`` applies it.

    Args:
        trials: every trial of the sweep in creation order (``build_trials_from_summary``).
        folders: ``{train-run folder: [its checkpoint folder names]}`` as found in storage.
        tracked: ``{train-run folder: checkpoint names its Ray snapshot tracks}``, for the runs
            that have a snapshot.
        policy: what to keep.
        mode: direction of the trials' scope scores.
        greater_is_better: direction of ``metric_for_best_model``.
        winner_trial_id: the sweep's winner, when it has one.
        sweep_uri: the sweep folder, the base of the paths in the plan.
        delete_running: delete (rather than defer) what the policy drops from running
            trials; only for a caller whose trial drivers repair snapshots before restoring.
        registered_latest: ``{train-run folder: the latest checkpoint its Ray snapshot
            registers}``; a running trial always keeps it.
        strippable: ``{train-run folder: checkpoint names holding optimizer state}``; those a
            completed trial keeps are stripped unless ``policy.keep_optimizer_state``.
    """
    registered_latest = registered_latest or {}
    strippable = {} if policy.keep_optimizer_state else (strippable or {})
    kept, deleted = select_sweep_partition(trials, policy, mode=mode, greater_is_better=greater_is_better,
                                           winner_trial_id=winner_trial_id)
    by_id = {t.trial_id: t for t in trials}
    plan: list[GcAction] = []
    for run in sorted(folders):
        trial = by_id.get(parse_train_run_name(run))
        if trial is None:
            plan.append(GcAction(join_uri(sweep_uri, run), KEEP, "trial not in summary.json: left alone"))
            continue
        rows = [GcAction(join_uri(sweep_uri, run, name),
                         *_select_folder_action(trial, name, kept, deleted, delete_running,
                                                registered_latest.get(run), tracked.get(run, set())))
                for name in sorted(folders[run], key=_folder_order)]
        dropped = {posixpath.basename(r.path) for r in rows if r.action == DELETE} & tracked.get(run, set())
        # Folders deleted while the trial ran: its controller kept naming them in the snapshot
        # it wrote last, which Ray refuses to load until they are dropped.
        dropped |= tracked.get(run, set()) - set(folders[run])
        # A running trial's controller rewrites its snapshot from memory: pruning it now is
        # undone at the next report; run_repair_snapshot does it before a restore instead.
        if dropped and not trial.running:
            plan.append(GcAction(join_uri(sweep_uri, run, SNAPSHOT_FILE), PRUNE_SNAPSHOT,
                                 f"drop {len(dropped)} deleted checkpoint(s) so Ray can still restore the run"))
        plan.extend(rows)
        if trial.completed and trial.history_known:
            plan.extend(GcAction(r.path, STRIP_STATE, "optimizer state of a completed trial: nothing resumes it")
                        for r in rows if r.action == KEEP and posixpath.basename(r.path) in strippable.get(run, ()))
    return plan


def build_plan_counts(plan: Sequence[GcAction]) -> dict[str, int]:
    """How many actions of each kind a plan holds (``summary.json``'s ``checkpoint_gc``)."""
    return {a: sum(1 for x in plan if x.action == a) for a in sorted({x.action for x in plan})}


def read_trials_gc_plan(sweep_uri: str, trials: Sequence[TrialCheckpoints], policy: RetentionPolicy, *,
                        mode: str, greater_is_better: bool, winner_trial_id: str | None,
                        delete_running: bool = False) -> list[GcAction]:
    """Read the sweep's storage listing (no writes) and plan the gc of ``trials``."""
    listing = read_storage_listing(sweep_uri)
    return select_gc_plan(trials, listing.folders, listing.tracked, policy, mode=mode,
                          greater_is_better=greater_is_better, winner_trial_id=winner_trial_id,
                          sweep_uri=listing.sweep_uri, delete_running=delete_running,
                          registered_latest=listing.registered_latest, strippable=listing.strippable)


def read_gc_plan(sweep_uri: str, policy: RetentionPolicy, greater_is_better: bool,
                 summary: SweepSummary | None = None, *, delete_running: bool = False) -> list[GcAction]:
    """Plan the gc of a sweep from its summary (read from ``summary.json`` unless the sweep
    driver passes the one it is about to write) and its storage listing."""
    summary = summary if summary is not None else SweepSummary.read(sweep_uri)
    return read_trials_gc_plan(sweep_uri, build_trials_from_summary(summary), policy, mode=summary.objective.mode,
                               greater_is_better=greater_is_better,
                               winner_trial_id=summary.winner.trial_id if summary.winner else None,
                               delete_running=delete_running)


#: Why ``ftplat checkpoints gc`` applies nothing to a sweep that ran after its summary: the
#: plan's lines, then the whole story.
RESUMED_SINCE_SUMMARY = "the sweep ran after summary.json was written"
RESUMED_SINCE_SUMMARY_DETAIL = (f"{RESUMED_SINCE_SUMMARY} (Tune saved its state later: a --resume is running, or "
                                "stopped before its end), so its trial statuses and histories are stale; gc applies "
                                "once the resume has ended and written its summary")


def read_resumed_since_summary(sweep_uri: str) -> bool:
    """Whether Tune saved the sweep's experiment state after ``summary.json`` was written.

    A sweep writes its summary after Tune's last save; a ``--resume`` saves again within
    seconds of its start, under a new file name. The summary then knows neither the resumed
    trials' new checkpoints nor that they run: planned from it, gc would treat a running trial
    as finished and delete its uploads and its restore point. The summary names the state file
    it followed; one that does not (older sweeps) is compared by modification times.
    """
    fs, summary_path = resolve_storage(build_summary_uri(sweep_uri))
    root = posixpath.dirname(summary_path)
    try:
        followed = read_json(build_summary_uri(sweep_uri)).get("tune_state_file")
    except (OSError, ValueError, AttributeError):
        followed = None
    if followed:
        newest = read_newest_experiment_state(fs, root)
        return newest is not None and posixpath.basename(newest) != followed
    summary_info = fs.get_file_info(summary_path)
    state = read_experiment_state_mtime(fs, root)
    return state is not None and summary_info.mtime is not None and state > summary_info.mtime.timestamp()


def build_deferred_plan(plan: Sequence[GcAction], why: str) -> list[GcAction]:
    """``plan`` with nothing left to apply: each deletion, strip and snapshot rewrite deferred."""
    return [a if a.action in (KEEP, DEFER)
            else GcAction(a.path, DEFER, f"would {a.action}: {a.reason}; deferred: {why}") for a in plan]


def format_gc_plan(plan: Sequence[GcAction]) -> str:
    """One line per action (action, path, reason), then the counts."""
    width = max((len(a.action) for a in plan), default=0)
    lines = [f"{a.action.ljust(width)}  {a.path}  ({a.reason})" for a in plan]
    counts = {name: sum(a.action == name for a in plan) for name in (KEEP, DELETE, DEFER, PRUNE_SNAPSHOT, STRIP_STATE)}
    lines.append(", ".join(f"{n} {name}" for name, n in counts.items() if n or name != STRIP_STATE))
    return "\n".join(lines)


def run_gc_plan(plan: Sequence[GcAction], dry_run: bool) -> list[GcAction]:
    """Apply the plan's snapshot rewrites, deletions and strips, in plan order; return those
    applied (none when ``dry_run``). Each snapshot is rewritten before its run's folders go."""
    if dry_run:
        return []
    deleted_names: dict[str, set[str]] = {}
    for a in plan:
        if a.action == DELETE:
            deleted_names.setdefault(posixpath.dirname(a.path), set()).add(posixpath.basename(a.path))
    applied = [a for a in plan if a.action in (PRUNE_SNAPSHOT, DELETE, STRIP_STATE)]
    for a in applied:
        if a.action == STRIP_STATE:
            run_strip_checkpoint(a.path)
            continue
        fs, path = resolve_storage(a.path)
        if a.action == DELETE:
            fs.delete_dir(path)
            continue
        # Read again, not from the plan: this is the snapshot the rewrite replaces.
        with fs.open_input_stream(path) as src:
            snapshot = src.read().decode("utf-8")
        run_path = posixpath.dirname(path)
        kept = ((select_snapshot_names(snapshot) & set(list_dirs(fs, run_path)))
                - deleted_names.get(posixpath.dirname(a.path), set()))
        # A half-written snapshot would make Ray refuse the run.
        run_write_text_atomically(fs, path, build_pruned_snapshot(snapshot, kept))
    return applied


def run_repair_snapshot(run_uri: str) -> set[str]:
    """Drop from a Train run's snapshot the checkpoints whose folders are gone; return their names.

    The sweep deletes checkpoints of running trials while their controller still lists them;
    Ray refuses to restore such a snapshot, so a trial driver calls this before every fit.
    """
    fs, run_path = resolve_storage(run_uri)
    path = posixpath.join(run_path, SNAPSHOT_FILE)
    snapshot = read_text(fs, path)
    if snapshot is None:
        return set()
    names = select_snapshot_names(snapshot)
    present = set(list_dirs(fs, run_path))
    missing = names - present
    if missing:
        run_write_text_atomically(fs, path, build_pruned_snapshot(snapshot, names & present))
    return missing
