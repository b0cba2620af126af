"""The sweep summary: every trial's values, status, scores under every scope, best checkpoint,
and the winner under the configured scope, read from Tune's results and the sweep's storage."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import Any

from ray.tune import ExperimentAnalysis
from ray.tune.result import TIME_TOTAL_S

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.tune.accounting import (build_trial_cost, build_trial_reservation, format_sweep_cost_line,
                                    select_trial_wall)
from ftplat.layout import (
    build_checkpoint_name,
    build_train_run_uri,
    build_trial_result_uri,
)
from ftplat.ray_internals import read_newest_experiment_state, read_trial_error, sort_trials_by_creation
from ftplat.records import (
    CHECKPOINT_NAME_KEY,
    COMPLETED_STATUS,
    HISTORY_KEYS,
    BestCheckpoint,
    Objective,
    SweepSummary,
    TrialRecord,
    Winner,
    clean_value,
    is_history_metric,
)
from ftplat.scoring import (SCOPES, compute_history_stats, is_finite_score, scope_score, select_best,
                             select_hf_best)
from ftplat.storage import join_uri, path_exists, read_json, resolve_storage
from ftplat.tune.run_history import read_trainer_state_evals, read_trial_history_file
from ftplat.tracking.runs import redact_text
from ftplat.units import format_bytes


def _read_train_result(run_uri: str) -> dict | None:
    uri = build_trial_result_uri(run_uri)
    return read_json(uri) if path_exists(uri) else None


def build_history_row(result: dict[str, Any], metrics: Iterable[str] = ()) -> dict[str, Any]:
    """What a trial's history keeps of one evaluation report: evaluation metrics as reported
    (an infinite value scores as Ray scores it), the rest JSON-safe (a DataFrame fills
    missing fields with NaN)."""
    keep = (*HISTORY_KEYS, *metrics, *(k for k in result if is_history_metric(k)))
    return {k: result[k] if k.startswith("eval_") else clean_value(result[k]) for k in dict.fromkeys(keep) if k in result}


def build_trial_history(tune_rows: list[dict], trainer_evals: list[dict] = ()) -> list[dict]:
    """A trial's evaluations in step order, each once, iterations renumbered 1..n.

    Tune's rows first (of two reports of one step, the later wins: a restarted trial reports
    again what a crash rolled back), then the evaluations only the Trainer state remembers (Tune's
    rows of a trial begin again where a restart resumed it), up to the last step Tune was told
    of: a trial ASHA stopped trains on until it is killed (reports reach Tune late), and the
    evaluations after the one it was stopped at are neither the scheduler's nor the searcher's.
    The summary and live retention score this same history, so they rank trials alike.
    """
    by_step: dict[Any, dict] = {}
    for row in tune_rows:
        by_step[row.get("step")] = row
    steps = [s for s in by_step if s is not None]
    last = max(steps) if steps else None
    for e in trainer_evals:
        if e.get("step") is not None and e["step"] not in by_step and (last is None or e["step"] <= last):
            by_step[e["step"]] = {**build_history_row(e), CHECKPOINT_NAME_KEY: build_checkpoint_name(e["step"]),
                                  "source": "trainer_state"}
    merged = sorted(by_step.values(), key=lambda r: r.get("step") or 0)
    return [{**row, "training_iteration": i} for i, row in enumerate(merged, start=1)]


def read_trial_record(trial, frame, *, job: JobConfig, space: SearchSpaceConfig,
                      sweep_path: str) -> tuple[TrialRecord, dict[str, float]]:
    """One trial's record and its scope statistics, from Tune's results (``frame``) and the
    Trainer state and training record of its Train run in storage."""
    metric, mode = space.objective.metric, space.objective.mode
    best_metric = job.training.metric_for_best_model
    rows = []
    if frame is not None and len(frame):
        # In the order Tune wrote them, not by training_iteration: that restarts at 1 when a
        # trial is resumed, and of two reports of one step the later must win.
        rows = [build_history_row(raw, (metric, best_metric)) for raw in frame.to_dict("records") if metric in raw]
    run_uri = build_train_run_uri(sweep_path, trial.trial_id)
    rows = build_trial_history([*(read_trial_history_file(run_uri) or []), *rows],
                               read_trainer_state_evals(run_uri, metric) or [])
    # Scores come from the values as reported (inf included), as Ray and live retention see
    # them; only the stored history is made JSON-safe.
    stats = compute_history_stats(rows, metric)
    best_row = select_hf_best(rows, lambda r: r.get(best_metric), job.training.resolved_greater_is_better)
    best_checkpoint = None
    if best_row is not None and best_row.get(CHECKPOINT_NAME_KEY):
        uri = join_uri(run_uri, best_row[CHECKPOINT_NAME_KEY])
        best_checkpoint = BestCheckpoint(path=uri, exists=path_exists(uri), step=best_row.get("step"),
                                         epoch=clean_value(best_row.get("epoch")), metric=best_metric,
                                         value=clean_value(best_row.get(best_metric)))
    hyperparameters = {k: clean_value(trial.config[k]) for k in space.parameters if k in trial.config}
    train_result = _read_train_result(run_uri)
    cpus, gpus = build_trial_reservation(job, hyperparameters)
    wall = select_trial_wall(train_result, (trial.last_result or {}).get(TIME_TOTAL_S))
    record = TrialRecord(
        trial_id=trial.trial_id,
        status=trial.status,
        hyperparameters=hyperparameters,
        scores={s: clean_value(scope_score(stats, s, mode)) for s in SCOPES},
        best_checkpoint=best_checkpoint,
        train_run_path=run_uri,
        train_result=train_result,
        error=read_trial_error(trial),
        history=[{k: clean_value(v) for k, v in row.items()} for row in rows],
        cost=build_trial_cost(wall_s=wall, cpus=cpus, gpus=gpus),
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
    mode = space.objective.mode
    # Only a finite score can win: Ray's rule (``select_best``) returns a lone trial whatever
    # its score, so a sweep whose one trial failed before evaluating would have a winner.
    # Of equal scores the first wins, as in Ray; trials that completed come first, so a trial
    # that failed midway does not win a tie against one that trained to its end.
    ranked = sorted(read, key=lambda rs: rs[0].status != COMPLETED_STATUS)
    winners = {s: select_best([(rec.trial_id, stats) for rec, stats in ranked
                               if is_finite_score(scope_score(stats, s, mode))], s, mode)
               for s in SCOPES}
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
        task=job.task.type,
        tune_state_file=read_tune_state_name(sweep_path),
        **details,
    )


def read_tune_state_name(sweep_path: str) -> str | None:
    """The name of the experiment-state file Tune saved last (``SweepSummary.tune_state_file``)."""
    fs, root = resolve_storage(sweep_path)
    newest = read_newest_experiment_state(fs, root)
    return posixpath.basename(newest) if newest else None


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
    sweep_cost = format_sweep_cost_line(summary)
    return "\n".join([*lines, *([sweep_cost] if sweep_cost else [])])


def format_winner_line(summary: SweepSummary) -> str:
    w = summary.winner
    metric = summary.objective.metric
    if w is None:
        return f"Winner (scope={summary.scope}): none (no trial reported {metric})"
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in w.hyperparameters.items())
    ckpt = redact_text(w.best_checkpoint.path) if w.best_checkpoint else "none"
    line = (f"Winner (scope={summary.scope}): trial {w.trial_id} {metric}={_fmt(w.score)} "
            f"[{params}] best checkpoint: {ckpt}")
    return "\n".join([line, *format_selection_lines(summary), *format_cost_lines(summary)])


def format_cost_lines(summary: SweepSummary) -> list[str]:
    """What the winner trained and what its checkpoints weigh (a peft adapter's: megabytes)."""
    trial = summary.winner_trial()
    result = (trial.train_result if trial else None) or {}
    if not result.get("total_parameters"):
        return []
    line = (f"  trained: {result['trainable_parameters']:,} of {result['total_parameters']:,} parameters "
            f"({100 * result['trainable_parameters'] / result['total_parameters']:.2f}%)")
    sizes = result.get("checkpoint_bytes") or {}
    if sizes.get("total"):
        line += (f"; a checkpoint {format_bytes(sizes['model'])} of model, "
                 f"{format_bytes(sizes['total'])} with training state")
    if result.get("peak_memory_bytes"):
        line += f"; peak worker memory {format_bytes(result['peak_memory_bytes'])}"
    return [line, *format_pace_lines(result.get("step_time"))]


def format_pace_lines(step_time: dict | None) -> list[str]:
    """The winner's steps (``train/step_time.py``): start-up inside ``train()``, then the pace."""
    if not step_time or step_time.get("step_ms_median") is None:
        return []
    first = step_time.get("first_10_steps_s")
    return [f"  pace: {step_time['steps']:,} steps, " + (f"the 10th after {first:g} s, then " if first else "")
            + f"{step_time['step_ms_median']:g} ms a step (median; mean {step_time['step_ms_mean']:g} ms "
              "with evaluations and saves)"]


def format_selection_lines(summary: SweepSummary) -> list[str]:
    """The split the winner was selected on with its score there, and its test score."""
    data, test, w = summary.data or {}, summary.test or {}, summary.winner
    lines = []
    if w and "eval" in data:
        ev = data["eval"]
        best = w.best_checkpoint
        value = f", best checkpoint {summary.metric_for_best_model}={_fmt(best.value)}" if best else ""
        lines.append(f"  validation: {ev['split']}, {ev['rows']} rows ({data.get('selection', 'the eval split')}) -> "
                     f"{summary.objective.metric}[{summary.scope}]={_fmt(w.score)}{value}")
    if test.get("metrics"):
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in test["metrics"].items() if k in build_test_keys(summary))
        lines.append(f"  test: {test['split']}, {test['rows']} rows (scored once after the sweep) -> {shown}")
    elif test.get("skipped") or test.get("error"):
        lines.append(f"  test: {test.get('skipped') or 'failed: ' + test['error']}")
    return lines


def build_test_keys(summary: SweepSummary) -> list[str]:
    """The test metrics the winner line shows: the objective's and the checkpoint metric's."""
    return [f"test_{m.removeprefix('eval_')}" for m in dict.fromkeys([summary.objective.metric,
                                                                         summary.metric_for_best_model])]
