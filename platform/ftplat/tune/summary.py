"""The sweep summary: every trial's values, status, scores under every scope, best checkpoint,
and the winner under the configured scope. Written as ``summary.json`` in the sweep folder."""

from __future__ import annotations

import math
import posixpath
import re
from typing import Any

from ray.tune import ExperimentAnalysis

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.checkpoints.gc import SUMMARY_FILE  # noqa: F401  (re-exported: the sweep writes it)
from ftplat.storage import join_uri, list_dir_names, path_exists, read_json
from ftplat.tracking.runs import redact_text
from ftplat.train.reporting import CHECKPOINT_NAME_KEY
from ftplat.tune.scope import SCOPES, compute_scope_stats, scope_score, select_best, sort_trials_by_creation
from ftplat.tune.trial import TRIAL_RESULT_FILE, build_train_run_name

_HISTORY_KEYS = ("training_iteration", "step", "epoch", "eval_loss", "eval_accuracy", "eval_f1",
                 "objective", "train_loss", CHECKPOINT_NAME_KEY)


def _clean(value: Any) -> Any:
    """JSON-safe scalars: numpy types to Python, NaN/inf to None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def select_best_row(rows: list[dict], metric: str, greater_is_better: bool) -> dict | None:
    """The evaluation HF's ``load_best_model_at_end`` would keep: strictly better than all
    earlier ones (the earliest of equal values), NaN never best."""
    best = None
    for row in rows:
        value = row.get(metric)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if best is None or (value > best[metric] if greater_is_better else value < best[metric]):
            best = row
    return best


def _read_error(trial) -> str | None:
    name = trial.run_metadata.error_filename
    if not name:
        return None
    try:
        fs = trial.storage.storage_filesystem
        with fs.open_input_stream(posixpath.join(trial.storage.trial_fs_path, name)) as src:
            lines = [ln for ln in src.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "error"
    except OSError:
        return "error (details in the trial folder)"


def _read_train_result(run_uri: str) -> dict | None:
    uri = join_uri(run_uri, TRIAL_RESULT_FILE)
    return read_json(uri) if path_exists(uri) else None


def read_trainer_state_evals(run_uri: str, metric: str) -> list[dict]:
    """Evaluation entries of the newest checkpoint's ``trainer_state.json`` in a Train run.

    After a restart Tune's history of a trial begins again where the run resumed, but the
    Trainer's own log history, restored from the checkpoint, still holds every evaluation
    (and none of those a crash rolled back)."""
    steps = [int(n.split("-", 1)[1]) for n in list_dir_names(run_uri) if re.fullmatch(r"checkpoint-\d+", n)]
    if not steps:
        return []
    uri = join_uri(run_uri, f"checkpoint-{max(steps)}", "trainer_state.json")
    if not path_exists(uri):
        return []
    return [e for e in read_json(uri).get("log_history", []) if metric in e]


def build_complete_history(tune_rows: list[dict], trainer_evals: list[dict]) -> list[dict]:
    """Tune's rows, with evaluations only the Trainer's state remembers put back in step
    order and iterations renumbered; without such gaps Tune's rows are returned as they are."""
    known = {row.get("step") for row in tune_rows}
    missing = [e for e in trainer_evals if e.get("step") not in known]
    if not missing:
        return tune_rows
    restored = [
        {**{k: _clean(e[k]) for k in _HISTORY_KEYS if k in e}, "checkpoint_name": f"checkpoint-{e['step']}",
         "source": "trainer_state"}
        for e in missing
    ]
    merged = sorted(tune_rows + restored, key=lambda r: r.get("step") or 0)
    return [{**row, "training_iteration": i} for i, row in enumerate(merged, start=1)]


def build_trial_record(trial, frame, *, job: JobConfig, space: SearchSpaceConfig, sweep_path: str) -> dict:
    metric, mode = space.objective.metric, space.objective.mode
    rows = []
    if frame is not None and len(frame):
        frame = frame.sort_values("training_iteration")
        for raw in frame.to_dict("records"):
            if metric in raw:
                rows.append({k: _clean(raw[k]) for k in _HISTORY_KEYS if k in raw})
    run_uri = join_uri(sweep_path, build_train_run_name(trial.trial_id))
    rows = build_complete_history(rows, read_trainer_state_evals(run_uri, metric))
    stats = compute_scope_stats((r["training_iteration"], r[metric] if r[metric] is not None else math.nan) for r in rows)
    best_row = select_best_row(rows, job.training.metric_for_best_model, job.training.resolved_greater_is_better)
    best_checkpoint = None
    if best_row is not None and best_row.get(CHECKPOINT_NAME_KEY):
        uri = join_uri(run_uri, best_row[CHECKPOINT_NAME_KEY])
        best_checkpoint = {
            "path": uri,
            "exists": path_exists(uri),
            "step": best_row.get("step"),
            "epoch": best_row.get("epoch"),
            job.training.metric_for_best_model: best_row.get(job.training.metric_for_best_model),
        }
    return {
        "trial_id": trial.trial_id,
        "status": trial.status,
        "hyperparameters": {k: _clean(trial.config[k]) for k in space.parameters if k in trial.config},
        "num_evaluations": len(rows),
        "scores": {s: _clean(scope_score(stats, s, mode)) for s in SCOPES},
        "best_checkpoint": best_checkpoint,
        "train_run_path": run_uri,
        "train_result": _read_train_result(run_uri),
        "error": _read_error(trial),
        "history": rows,
        "_stats": stats,
    }


def build_summary(
    analysis: ExperimentAnalysis,
    *,
    sweep_name: str,
    sweep_path: str,
    job: JobConfig,
    space: SearchSpaceConfig,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    frames = analysis.trial_dataframes
    trials = [
        build_trial_record(t, frames.get(t.trial_id), job=job, space=space, sweep_path=sweep_path)
        for t in sort_trials_by_creation(analysis.trials)
    ]
    candidates = [(rec["trial_id"], rec.pop("_stats")) for rec in trials]
    mode = space.objective.mode
    winners = {s: select_best(candidates, s, mode) for s in SCOPES}
    by_id = {rec["trial_id"]: rec for rec in trials}
    winner_id = winners[space.scope]
    winner = None
    if winner_id is not None:
        rec = by_id[winner_id]
        winner = {
            "trial_id": winner_id,
            "score": rec["scores"][space.scope],
            "hyperparameters": rec["hyperparameters"],
            "best_checkpoint": rec["best_checkpoint"],
        }
    return {
        "sweep_name": sweep_name,
        "sweep_path": sweep_path,
        "objective": {"metric": space.objective.metric, "mode": mode},
        "scope": space.scope,
        "metric_for_best_model": job.training.metric_for_best_model,
        "greater_is_better": job.training.resolved_greater_is_better,
        "save_total_limit": job.training.save_total_limit,
        "retention": job.retention.model_dump(),
        "num_trials": len(trials),
        "status_counts": {s: sum(1 for r in trials if r["status"] == s) for s in sorted({r["status"] for r in trials})},
        "winner": winner,
        "winners_by_scope": winners,
        "trials": trials,
        **(extra or {}),
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 else f"{value:.4f}"
    return str(value)


def format_summary_table(summary: dict[str, Any]) -> str:
    """A short fixed-width table of the trials, the winner marked, then the winner line."""
    params = list(summary["trials"][0]["hyperparameters"]) if summary["trials"] else []
    scope = summary["scope"]
    headers = ["", "trial", "status", *[p.split(".")[-1] for p in params], f"score[{scope}]", "evals", "best ckpt"]
    winner_id = (summary["winner"] or {}).get("trial_id")
    rows = []
    for rec in summary["trials"]:
        ckpt = rec["best_checkpoint"]
        rows.append([
            "*" if rec["trial_id"] == winner_id else "",
            rec["trial_id"],
            rec["status"],
            *[_fmt(rec["hyperparameters"].get(p)) for p in params],
            _fmt(rec["scores"][scope]),
            str(rec["num_evaluations"]),
            posixpath.basename(ckpt["path"]) if ckpt else "-",
        ])
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [headers, *rows]]
    lines.append(format_winner_line(summary))
    return "\n".join(lines)


def format_winner_line(summary: dict[str, Any]) -> str:
    w = summary["winner"]
    metric = summary["objective"]["metric"]
    if w is None:
        return f"Winner (scope={summary['scope']}): none (no trial reported {metric})"
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in w["hyperparameters"].items())
    ckpt = redact_text(w["best_checkpoint"]["path"]) if w["best_checkpoint"] else "none"
    return (
        f"Winner (scope={summary['scope']}): trial {w['trial_id']} {metric}={_fmt(w['score'])} "
        f"[{params}] best checkpoint: {ckpt}"
    )
