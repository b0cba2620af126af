"""The sweep summary: every trial's values, status, scores under every scope, best checkpoint,
and the winner under the configured scope, read from Tune's results and the sweep's storage."""

from __future__ import annotations

import posixpath
from typing import Any

from ray.tune import ExperimentAnalysis

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.layout import build_checkpoint_name, build_train_run_uri, build_trial_result_uri, parse_checkpoint_step
from ftplat.ray_internals import read_trial_error, sort_trials_by_creation
from ftplat.records import (
    CHECKPOINT_NAME_KEY,
    HISTORY_KEYS,
    BestCheckpoint,
    Objective,
    SweepSummary,
    TrialRecord,
    Winner,
    clean_value,
)
from ftplat.scoring import SCOPES, compute_history_stats, scope_score, select_best, select_hf_best
from ftplat.storage import join_uri, list_dir_names, path_exists, read_json
from ftplat.tracking.runs import redact_text


def _read_train_result(run_uri: str) -> dict | None:
    uri = build_trial_result_uri(run_uri)
    return read_json(uri) if path_exists(uri) else None


def read_trainer_state_evals(run_uri: str, metric: str) -> list[dict]:
    """Evaluation entries of the newest checkpoint's ``trainer_state.json`` in a Train run.

    After a restart Tune's history of a trial begins again where the run resumed, but the
    Trainer's own log history, restored from the checkpoint, still holds every evaluation
    (and none of those a crash rolled back)."""
    steps = [step for step in map(parse_checkpoint_step, list_dir_names(run_uri)) if step is not None]
    if not steps:
        return []
    uri = join_uri(run_uri, build_checkpoint_name(max(steps)), "trainer_state.json")
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
        {**{k: clean_value(e[k]) for k in HISTORY_KEYS if k in e},
         CHECKPOINT_NAME_KEY: build_checkpoint_name(e["step"]), "source": "trainer_state"}
        for e in missing
    ]
    merged = sorted(tune_rows + restored, key=lambda r: r.get("step") or 0)
    return [{**row, "training_iteration": i} for i, row in enumerate(merged, start=1)]


def read_trial_record(trial, frame, *, job: JobConfig, space: SearchSpaceConfig,
                      sweep_path: str) -> tuple[TrialRecord, dict[str, float]]:
    """One trial's record and its scope statistics, from Tune's results (``frame``) and the
    Trainer state and training record of its Train run in storage."""
    metric, mode = space.objective.metric, space.objective.mode
    rows = []
    if frame is not None and len(frame):
        frame = frame.sort_values("training_iteration")
        for raw in frame.to_dict("records"):
            if metric in raw:
                rows.append({k: clean_value(raw[k]) for k in HISTORY_KEYS if k in raw})
    run_uri = build_train_run_uri(sweep_path, trial.trial_id)
    rows = build_complete_history(rows, read_trainer_state_evals(run_uri, metric))
    stats = compute_history_stats(rows, metric)
    best_metric = job.training.metric_for_best_model
    best_row = select_hf_best(rows, lambda r: r.get(best_metric), job.training.resolved_greater_is_better)
    best_checkpoint = None
    if best_row is not None and best_row.get(CHECKPOINT_NAME_KEY):
        uri = join_uri(run_uri, best_row[CHECKPOINT_NAME_KEY])
        best_checkpoint = BestCheckpoint(path=uri, exists=path_exists(uri), step=best_row.get("step"),
                                         epoch=best_row.get("epoch"), metric=best_metric,
                                         value=best_row.get(best_metric))
    record = TrialRecord(
        trial_id=trial.trial_id,
        status=trial.status,
        hyperparameters={k: clean_value(trial.config[k]) for k in space.parameters if k in trial.config},
        scores={s: clean_value(scope_score(stats, s, mode)) for s in SCOPES},
        best_checkpoint=best_checkpoint,
        train_run_path=run_uri,
        train_result=_read_train_result(run_uri),
        error=read_trial_error(trial),
        history=rows,
    )
    return record, stats


def read_sweep_summary(
    analysis: ExperimentAnalysis,
    *,
    sweep_name: str,
    sweep_path: str,
    job: JobConfig,
    space: SearchSpaceConfig,
    **details: Any,
) -> SweepSummary:
    """The summary of a sweep Tune has run; ``details`` fill the informational fields
    (``data``, ``wall_seconds``, ``versions``, ``mlflow``)."""
    frames = analysis.trial_dataframes
    read = [read_trial_record(t, frames.get(t.trial_id), job=job, space=space, sweep_path=sweep_path)
            for t in sort_trials_by_creation(analysis.trials)]
    trials = [rec for rec, _ in read]
    candidates = [(rec.trial_id, stats) for rec, stats in read]
    mode = space.objective.mode
    winners = {s: select_best(candidates, s, mode) for s in SCOPES}
    winner = None
    if winners[space.scope] is not None:
        rec = next(r for r in trials if r.trial_id == winners[space.scope])
        winner = Winner(trial_id=rec.trial_id, score=rec.scores[space.scope], hyperparameters=rec.hyperparameters,
                        best_checkpoint=rec.best_checkpoint)
    return SweepSummary(
        sweep_name=sweep_name,
        sweep_path=sweep_path,
        objective=Objective(metric=space.objective.metric, mode=mode),
        scope=space.scope,
        metric_for_best_model=job.training.metric_for_best_model,
        greater_is_better=job.training.resolved_greater_is_better,
        save_total_limit=job.training.save_total_limit,
        retention=job.retention.model_dump(),
        winner=winner,
        winners_by_scope=winners,
        trials=trials,
        **details,
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 else f"{value:.4f}"
    return str(value)


def format_summary_table(summary: SweepSummary) -> str:
    """A short fixed-width table of the trials, the winner marked, then the winner line."""
    params = list(summary.trials[0].hyperparameters) if summary.trials else []
    scope = summary.scope
    headers = ["", "trial", "status", *[p.split(".")[-1] for p in params], f"score[{scope}]", "evals", "best ckpt"]
    winner_id = summary.winner.trial_id if summary.winner else None
    rows = []
    for rec in summary.trials:
        ckpt = rec.best_checkpoint
        rows.append([
            "*" if rec.trial_id == winner_id else "",
            rec.trial_id,
            rec.status,
            *[_fmt(rec.hyperparameters.get(p)) for p in params],
            _fmt(rec.scores.get(scope)),
            str(rec.num_evaluations),
            posixpath.basename(ckpt.path) if ckpt else "-",
        ])
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [headers, *rows]]
    lines.append(format_winner_line(summary))
    return "\n".join(lines)


def format_winner_line(summary: SweepSummary) -> str:
    w = summary.winner
    metric = summary.objective.metric
    if w is None:
        return f"Winner (scope={summary.scope}): none (no trial reported {metric})"
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in w.hyperparameters.items())
    ckpt = redact_text(w.best_checkpoint.path) if w.best_checkpoint else "none"
    return (
        f"Winner (scope={summary.scope}): trial {w.trial_id} {metric}={_fmt(w.score)} "
        f"[{params}] best checkpoint: {ckpt}"
    )
