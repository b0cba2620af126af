"""A Train run's evaluation history as storage keeps it: the Trainer state of its latest
registered checkpoint, and the ``history.json`` live retention writes for a finished trial.

The summary, live retention and ``sweeps show`` rebuild histories from these, and a trial
driver that finds its trial already finished reports its last evaluation from them. Reads only.
"""

from __future__ import annotations

from typing import NamedTuple

from ftplat.layout import build_trial_history_uri, parse_checkpoint_step
from ftplat.ray_internals import SNAPSHOT_FILE, select_snapshot_names
from ftplat.storage import join_uri, list_dir_names, path_exists, read_json, read_text


def read_trainer_state_log(run_uri: str) -> list[dict] | None:
    """The log history in the ``trainer_state.json`` of a Train run's latest checkpoint.

    After a restart Tune's history of a trial begins again where the run resumed, but the
    Trainer's own log history, restored from the checkpoint, still holds every evaluation
    (and none of those a crash rolled back). The latest is the one Ray's snapshot registers:
    a newer folder can be an upload cut short, whose Trainer state names evaluations nobody
    reported. Without a snapshot, the newest folder. Returns [] when the run has no
    checkpoint, None when it has some but no readable Trainer state (history unknown).
    """
    folders = list_dir_names(run_uri)
    snapshot_uri = join_uri(run_uri, SNAPSHOT_FILE)
    names = folders
    if path_exists(snapshot_uri):
        with_snapshot = select_snapshot_names(read_text(snapshot_uri))
        names = [n for n in folders if n in with_snapshot]
    candidates = sorted((s, n) for n in names if (s := parse_checkpoint_step(n)) is not None)
    if not candidates:
        return [] if not any(parse_checkpoint_step(n) is not None for n in folders) else None
    for _, name in reversed(candidates):
        uri = join_uri(run_uri, name, "trainer_state.json")
        try:
            state = read_json(uri) if path_exists(uri) else None
        except (OSError, ValueError):  # half written or half deleted
            state = None
        if state is not None:
            return list(state.get("log_history", []))
    return None


def read_trainer_state_evals(run_uri: str, metric: str) -> list[dict] | None:
    """The evaluation entries (those logging ``metric``) of ``read_trainer_state_log``, each
    with the training loss logged last before it (``train_loss``, as its report had it)."""
    log = read_trainer_state_log(run_uri)
    if log is None:
        return None
    evals, loss = [], None
    for entry in log:
        loss = entry["loss"] if "loss" in entry else loss
        if metric in entry:
            evals.append({**entry, "train_loss": loss} if loss is not None and "train_loss" not in entry else entry)
    return evals


class StoredHistory(NamedTuple):
    """A trial's ``history.json`` as storage holds it."""

    rows: list[dict] | None  # None when there is no file, or it cannot be read
    unreadable: bool = False  # a file is there but is not a JSON list (torn, or half deleted)


def read_stored_history(run_uri: str) -> StoredHistory:
    """The history live retention wrote for a trial once it had finished, before deleting any
    of its checkpoints (which hold the Trainer states the history could otherwise be rebuilt
    from). One input among others, never the whole truth: a trial that failed and was run
    again by ``--resume`` evaluated after its file was written."""
    uri = build_trial_history_uri(run_uri)
    try:
        if not path_exists(uri):
            return StoredHistory(None)
        rows = read_json(uri)
    except (OSError, ValueError):  # torn (written in place before writes went aside), or half deleted
        return StoredHistory(None, unreadable=True)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return StoredHistory(None, unreadable=True)
    return StoredHistory(rows)


def read_trial_history_file(run_uri: str) -> list[dict] | None:
    """The rows of ``read_stored_history``; None when there is no readable file."""
    return read_stored_history(run_uri).rows


def read_finished_evaluations(run_uri: str, metric: str) -> tuple[list[dict], float | None] | None:
    """Every evaluation of a trial that trained to its end, in order, and its last train loss.

    Two sources, and the one that reaches the later step wins: ``history.json`` when live
    retention wrote it (retention may have deleted checkpoints since, and the registered
    latest then stops short), and the Trainer state of the latest registered checkpoint, which
    right after a trial is its last one (the Trainer's rotation never deletes the newest) and
    holds every evaluation; it wins over a ``history.json`` written when an earlier run of a
    failed trial ended. None when neither can be read.
    """
    stored = [r for r in read_stored_history(run_uri).rows or [] if metric in r]
    log = read_trainer_state_log(run_uri) or []
    logged = [e for e in log if metric in e]
    if stored and (not logged or _last_step(stored) >= _last_step(logged)):
        evals = stored  # live retention's rows carry the train loss logged before each evaluation
        losses = [r.get("train_loss") for r in stored]
    else:  # the Trainer's log has its train losses as entries of their own
        evals = logged
        losses = [e.get("loss") for e in log]
    losses = [x for x in losses if x is not None]
    return (evals, losses[-1] if losses else None) if evals else None


def _last_step(rows: list[dict]) -> int:
    return max(int(r.get("step") or 0) for r in rows)
