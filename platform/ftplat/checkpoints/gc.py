"""Applying a ``RetentionPolicy`` to a sweep in storage: ``ftplat checkpoints gc SWEEP``.

Layout read (local path, NFS mount or ``s3://``, all through pyarrow filesystems)::

    {sweep}/summary.json                                  trials, statuses, scores, histories
    {sweep}/train-{trial_id}/checkpoint_manager_snapshot.json   Ray Train V2's tracked checkpoints
    {sweep}/train-{trial_id}/checkpoint-{step}/           one per reported evaluation

The kept set comes from ``retention.select_sweep_partition`` over the histories in ``summary.json``
(every reported checkpoint, deleted or not, so re-running gc is idempotent). On top of it:

* A checkpoint folder no history row names is an orphan (an ASHA-stopped trial leaves these):
  deleted when its trial has finished, kept while it runs, since it may be an upload whose
  report has not reached the summary yet.
* ``ftplat checkpoints gc`` deletes nothing of a running trial; what the policy would remove is
  listed as ``defer``. Its Train controller holds the checkpoint list in memory and rewrites the
  snapshot from it on every report, so a folder deleted under it comes back in the snapshot and
  would make the next restore of that run fail. The sweep driver itself does delete there
  (``delete_running=True``, after every evaluation, see ``tune/live_retention.py``) because the
  trial driver repairs the run's snapshot (``run_repair_snapshot``) before every restore.
* Before deleting checkpoints a finished trial's snapshot tracks, the snapshot is rewritten
  without them (``build_pruned_snapshot``), so ``Result.from_path`` and a restore of the run
  still work: Ray's ``_assert_checkpoints_exist`` refuses a snapshot naming a missing folder.
  Rewrite first, delete second (Ray's own order): a crash in between leaves untracked folders,
  which the next gc removes as orphans, never a snapshot naming a deleted folder.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

import pyarrow.fs as pafs

from ftplat.checkpoints.retention import (
    CheckpointInfo,
    RetentionPolicy,
    TrialCheckpoints,
    select_sweep_partition,
)
from ftplat.storage import join_uri, resolve_storage

SUMMARY_FILE = "summary.json"
# ray.train.v2._internal.constants.CHECKPOINT_MANAGER_SNAPSHOT_FILENAME (Ray 2.60).
SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"
TRAIN_RUN_PREFIX = "train-"
# ftplat names checkpoints checkpoint-{step}; Ray's default is checkpoint_<timestamp>.
CHECKPOINT_PREFIX = "checkpoint"
# Tune statuses after which a trial writes nothing more (PENDING and PAUSED ones come back).
FINISHED_STATUSES = frozenset({"TERMINATED", "ERROR"})
KEEP, DELETE, DEFER, PRUNE_SNAPSHOT = "keep", "delete", "defer", "prune-snapshot"
_SNAPSHOT_KEYS = ("checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result",
                  "pending_training_results", "pending_validation_specs")
_SNAPSHOT_NAME_LISTS = ("validated_checkpoint_dir_names", "timed_out_validation_checkpoint_dir_names",
                        "failed_validation_checkpoint_dir_names")
_STEP_RE = re.compile(r"^checkpoint-(\d+)$")


class GcAction(NamedTuple):
    """One line of a gc plan: a checkpoint folder (or a trial's snapshot) and what to do."""

    path: str
    action: str
    reason: str


def build_trials_from_summary(summary: dict[str, Any]) -> list[TrialCheckpoints]:
    """Every trial's reported checkpoints, status and scope score, in the summary's order.

    A checkpoint reported twice (a restarted trial overwrites the folder) takes its last row.
    """
    metric, scope = summary["metric_for_best_model"], summary["scope"]
    trials = []
    for rec in summary["trials"]:
        rows = {row["checkpoint_name"]: row for row in rec.get("history", []) if row.get("checkpoint_name")}
        checkpoints = []
        for name, row in rows.items():
            match = _STEP_RE.match(name)
            step = int(match.group(1)) if match else row.get("step")
            if step is None:
                raise ValueError(f"trial {rec['trial_id']}: no step for checkpoint {name!r} in summary.json")
            value = row.get(metric)
            checkpoints.append(CheckpointInfo(name, step, None if value is None else float(value)))
        trials.append(TrialCheckpoints(
            trial_id=rec["trial_id"],
            checkpoints=checkpoints,
            running=rec["status"] not in FINISHED_STATUSES,
            scope_score=(rec.get("scores") or {}).get(scope),
        ))
    return trials


def _folder_order(name: str) -> tuple[int, str]:
    match = _STEP_RE.match(name)
    return (int(match.group(1)) if match else -1, name)


def _select_folder_action(
    trial: TrialCheckpoints, name: str, kept: dict, deleted: dict, delete_running: bool
) -> tuple[str, str]:
    """(action, reason) for one checkpoint folder of a trial named in the summary."""
    key = (trial.trial_id, name)
    if key in kept:
        return KEEP, kept[key]
    if not trial.running:
        return DELETE, deleted.get(key, "orphan, not tracked")
    if key in deleted:
        if delete_running:
            return DELETE, f"{deleted[key]}; the trial is running"
        return DEFER, f"{deleted[key]}; the trial is still running"
    return KEEP, "not reported yet: the running trial may still be uploading it"


def select_gc_plan(
    summary: dict[str, Any],
    folders: dict[str, list[str]],
    tracked: dict[str, set[str]],
    policy: RetentionPolicy,
    *,
    greater_is_better: bool,
    sweep_uri: str,
    delete_running: bool = False,
) -> list[GcAction]:
    """The plan for listed storage, in the order ``run_gc_plan`` applies it.

    Args:
        summary: the sweep's ``summary.json``.
        folders: ``{train-run folder: [its checkpoint folder names]}`` as found in storage.
        tracked: ``{train-run folder: checkpoint names its Ray snapshot tracks}``, for the runs
            that have a snapshot.
        policy: what to keep.
        greater_is_better: direction of ``metric_for_best_model``.
        sweep_uri: the sweep folder, the base of the paths in the plan.
        delete_running: delete (rather than defer) what the policy drops from running
            trials; only for a caller whose trial drivers repair snapshots before restoring.
    """
    trials = build_trials_from_summary(summary)
    kwargs = dict(mode=summary["objective"]["mode"], greater_is_better=greater_is_better,
                  winner_trial_id=(summary.get("winner") or {}).get("trial_id"))
    kept, deleted = select_sweep_partition(trials, policy, **kwargs)
    by_id = {t.trial_id: t for t in trials}
    plan: list[GcAction] = []
    for run in sorted(folders):
        trial = by_id.get(run[len(TRAIN_RUN_PREFIX):])
        if trial is None:
            plan.append(GcAction(join_uri(sweep_uri, run), KEEP, "trial not in summary.json: left alone"))
            continue
        rows = [GcAction(join_uri(sweep_uri, run, name),
                         *_select_folder_action(trial, name, kept, deleted, delete_running))
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
    return plan


def _list_dirs(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(posixpath.basename(i.path) for i in infos if i.type == pafs.FileType.Directory)


def _read_text(fs: pafs.FileSystem, path: str) -> str | None:
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as src:
        return src.read().decode("utf-8")


def select_snapshot_names(snapshot_json: str) -> set[str]:
    """Every checkpoint folder a Ray Train V2 snapshot refers to."""
    state = _parse_snapshot(snapshot_json)
    entries = [*state["checkpoint_results"], *state["pending_training_results"]]
    if state["latest_checkpoint_result"] is not None:
        entries.append(state["latest_checkpoint_result"])
    return {entry["checkpoint_dir_name"] for entry in entries}


def build_gc_plan(sweep_uri: str, policy: RetentionPolicy, greater_is_better: bool,
                  summary: dict[str, Any] | None = None, *, delete_running: bool = False) -> list[GcAction]:
    """Read the sweep's storage listing (no writes) and plan the gc; the summary is read from
    ``summary.json`` unless the sweep driver passes the one it is about to write."""
    if "://" not in sweep_uri:
        # pyarrow wants absolute local paths; the CLI may be given a relative one.
        sweep_uri = os.path.abspath(sweep_uri)
    fs, root = resolve_storage(sweep_uri)
    if summary is None:
        text = _read_text(fs, posixpath.join(root, SUMMARY_FILE))
        if text is None:
            raise ValueError(f"no {SUMMARY_FILE} in {sweep_uri}: not an ftplat sweep folder, or it has not ended")
        summary = json.loads(text)
    folders, tracked = {}, {}
    for run in _list_dirs(fs, root):
        if not run.startswith(TRAIN_RUN_PREFIX):
            continue
        run_path = posixpath.join(root, run)
        folders[run] = [n for n in _list_dirs(fs, run_path) if n.startswith(CHECKPOINT_PREFIX)]
        snapshot = _read_text(fs, posixpath.join(run_path, SNAPSHOT_FILE))
        if snapshot is not None:
            tracked[run] = select_snapshot_names(snapshot)
    return select_gc_plan(summary, folders, tracked, policy, greater_is_better=greater_is_better,
                          sweep_uri=sweep_uri, delete_running=delete_running)


def _parse_snapshot(snapshot_json: str) -> dict[str, Any]:
    state = json.loads(snapshot_json)
    missing = [k for k in _SNAPSHOT_KEYS if k not in state]
    if missing or len(state["checkpoint_results"]) != len(state["checkpoint_report_indices"]):
        # Another Ray version's layout: better to stop than to write a snapshot Ray rejects.
        raise ValueError(f"unrecognised Ray checkpoint manager snapshot (missing {missing or 'consistency'})")
    return state


def build_pruned_snapshot(snapshot_json: str, kept_names: Collection[str]) -> str:
    """A Ray Train V2 ``checkpoint_manager_snapshot.json`` without the checkpoints not in
    ``kept_names``, still loadable by Ray's ``CheckpointManager._load_state``.

    The per-checkpoint lists stay parallel (results with report indices, pending results with
    validation specs). If the latest checkpoint goes, the latest becomes the surviving
    checkpoint reported last (none if nothing survives): Ray looks the latest up among the
    results, and a restore resumes from it. Everything else (``ray_version``,
    ``current_report_index``, unknown keys) is left as it was.
    """
    state = _parse_snapshot(snapshot_json)
    kept_names = set(kept_names)

    def keep(entry: dict) -> bool:
        return entry["checkpoint_dir_name"] in kept_names

    results = [(r, i) for r, i in zip(state["checkpoint_results"], state["checkpoint_report_indices"]) if keep(r)]
    state["checkpoint_results"] = [r for r, _ in results]
    state["checkpoint_report_indices"] = [i for _, i in results]
    pending = [(r, v) for r, v in zip(state["pending_training_results"], state["pending_validation_specs"]) if keep(r)]
    state["pending_training_results"] = [r for r, _ in pending]
    state["pending_validation_specs"] = [v for _, v in pending]
    for key in _SNAPSHOT_NAME_LISTS:
        if key in state:
            state[key] = [name for name in state[key] if name in kept_names]
    latest = state["latest_checkpoint_result"]
    if latest is not None and not keep(latest):
        state["latest_checkpoint_result"] = max(results, key=lambda ri: ri[1])[0] if results else None
    return json.dumps(state, separators=(",", ":"))


def format_gc_plan(plan: Sequence[GcAction]) -> str:
    """One line per action (action, path, reason), then the counts."""
    width = max((len(a.action) for a in plan), default=0)
    lines = [f"{a.action.ljust(width)}  {a.path}  ({a.reason})" for a in plan]
    counts = {name: sum(a.action == name for a in plan) for name in (KEEP, DELETE, DEFER, PRUNE_SNAPSHOT)}
    lines.append(", ".join(f"{n} {name}" for name, n in counts.items()))
    return "\n".join(lines)


def run_gc_plan(plan: Sequence[GcAction], dry_run: bool) -> list[GcAction]:
    """Apply the plan's snapshot rewrites and deletions, in plan order; return those applied
    (none when ``dry_run``). Each snapshot is rewritten before its run's folders go."""
    if dry_run:
        return []
    deleted_names: dict[str, set[str]] = {}
    for a in plan:
        if a.action == DELETE:
            deleted_names.setdefault(posixpath.dirname(a.path), set()).add(posixpath.basename(a.path))
    applied = [a for a in plan if a.action in (PRUNE_SNAPSHOT, DELETE)]
    for a in applied:
        fs, path = resolve_storage(a.path)
        if a.action == DELETE:
            fs.delete_dir(path)
            continue
        # Read again, not from the plan: this is the snapshot the rewrite replaces.
        with fs.open_input_stream(path) as src:
            snapshot = src.read().decode("utf-8")
        run_path = posixpath.dirname(path)
        kept = ((select_snapshot_names(snapshot) & set(_list_dirs(fs, run_path)))
                - deleted_names.get(posixpath.dirname(a.path), set()))
        _write_text_atomically(fs, path, build_pruned_snapshot(snapshot, kept))
    return applied


def _write_text_atomically(fs: pafs.FileSystem, path: str, text: str) -> None:
    # A half-written snapshot would make Ray refuse the run: write aside, then move over.
    tmp = f"{path}.ftplat-tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(text.encode("utf-8"))
    fs.move(tmp, path)


def run_gc(sweep_uri: str, policy: RetentionPolicy, *, greater_is_better: bool, dry_run: bool) -> list[GcAction]:
    """Plan and (unless ``dry_run``) apply the gc of one sweep; returns the plan."""
    plan = build_gc_plan(sweep_uri, policy, greater_is_better)
    run_gc_plan(plan, dry_run)
    return plan


def run_repair_snapshot(run_uri: str) -> set[str]:
    """Drop from a Train run's snapshot the checkpoints whose folders are gone; return their names.

    The sweep deletes checkpoints of running trials while their controller still lists them;
    Ray refuses to restore such a snapshot, so a trial driver calls this before every fit.
    """
    fs, run_path = resolve_storage(run_uri)
    path = posixpath.join(run_path, SNAPSHOT_FILE)
    snapshot = _read_text(fs, path)
    if snapshot is None:
        return set()
    names = select_snapshot_names(snapshot)
    present = set(_list_dirs(fs, run_path))
    missing = names - present
    if missing:
        _write_text_atomically(fs, path, build_pruned_snapshot(snapshot, names & present))
    return missing
