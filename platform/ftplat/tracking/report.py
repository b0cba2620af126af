"""Closing a sweep in MLflow: trial scores and statuses, the sweep report plot, the winner
logged on the parent run and registered in the Model Registry."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
from typing import Any

from ftplat.checkpoints.task_file import build_task_settings, run_write_task_file
from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.config.loading import build_trial_job
from ftplat.layout import SUMMARY_FILE, build_sweep_config_uri
from ftplat.records import SweepSummary, TrialRecord
from ftplat.storage import path_exists, read_json
from ftplat.scoring import is_finite_score
from ftplat.tracking.guard import TrackingGuard
from ftplat.tracking.params import build_axis_scale
from ftplat.tracking.runs import build_client, find_trial_run_id, redact_config, run_end_parent

logger = logging.getLogger(__name__)


def build_trial_status(record: TrialRecord) -> str:
    """MLflow status mirroring Tune: errors FAILED, a trial that trained to its own end (its
    driver wrote its training record) FINISHED, one stopped early (ASHA) KILLED. Trials may
    differ in length (a searched epoch count), so no evaluation count can say which ended."""
    if record.status == "ERROR":
        return "FAILED"
    if record.status == "TERMINATED" and record.train_result is not None:
        return "FINISHED"
    return "KILLED"


#: The title says the winner is red and bold: every other trial is drawn in one neutral colour.
WINNER_COLOUR, OTHER_COLOUR = "tab:red", "0.6"


def run_write_report_figure(summary: SweepSummary, path: str, space: dict[str, Any] | None = None) -> None:
    """Write a PNG: scope score against each hyperparameter, and every trial's evaluation curve.

    ``space`` maps each parameter to its distribution (the search space's ``parameters``): an
    axis is logarithmic when the values were sampled on a log scale, categorical for a choice.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = [t for t in summary.trials if t.history]
    params = list(summary.trials[0].hyperparameters) if summary.trials else []
    scope, metric = summary.scope, summary.objective.metric
    winner = summary.winner.trial_id if summary.winner else None
    # Failed trials have no score, and a NaN evaluation is stored as None.
    scored = sorted((t for t in trials if is_finite_score(t.scores.get(scope))),
                    key=lambda t: t.trial_id == winner)  # the winner drawn last, on top
    fig, axes = plt.subplots(1, len(params) + 1, figsize=(4.2 * (len(params) + 1), 3.6), squeeze=False)
    for ax, param in zip(axes[0], params):
        dist = (space or {}).get(param)
        scale = build_axis_scale(dist)
        points = [(t.hyperparameters.get(param), t.scores[scope], t.trial_id == winner) for t in scored
                  if param in t.hyperparameters]
        if scale == "categorical":
            labels = [repr(v) for v in dist["values"]]
            points = [(labels.index(repr(x)), y, w) for x, y, w in points if repr(x) in labels]
            ax.set_xticks(range(len(labels)), labels)
        else:
            points = [(x, y, w) for x, y, w in points if isinstance(x, (int, float)) and not isinstance(x, bool)]
        ax.scatter([x for x, _, _ in points], [y for _, y, _ in points],
                   c=[WINNER_COLOUR if w else OTHER_COLOUR for _, _, w in points],
                   s=[70 if w else 30 for _, _, w in points], edgecolors="black", linewidths=0.4)
        if scale == "log" and points and min(x for x, _, _ in points) > 0:
            ax.set_xscale("log")
        ax.set_xlabel(param)
        ax.set_ylabel(f"{metric} [{scope}]")
    curves = axes[0][-1]
    for t in sorted(trials, key=lambda t: t.trial_id == winner):
        xs = [r.get("epoch") or r["training_iteration"] for r in t.history]
        ys = [math.nan if r.get(metric) is None else r[metric] for r in t.history]
        won = t.trial_id == winner
        curves.plot(xs, ys, marker="o", color=WINNER_COLOUR if won else OTHER_COLOUR, lw=2.5 if won else 1,
                    label=f"{t.trial_id} (winner)" if won else t.trial_id, zorder=3 if won else 2)
    curves.set_xlabel("epoch")
    curves.set_ylabel(metric)
    if trials:
        curves.legend(fontsize="small")
    fig.suptitle(f"sweep {summary.sweep_name}: winner {winner} (red, bold)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@contextlib.contextmanager
def scoped_tracking_uri(uri: str):
    """``mlflow.set_tracking_uri`` for a block only: it sets a process global and exports
    MLFLOW_TRACKING_URI, which would leak into every later sweep of this process."""
    import mlflow

    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(None)
        if env_before is not None:
            os.environ["MLFLOW_TRACKING_URI"] = env_before


def run_register_winner(tracking: dict[str, str], summary: SweepSummary, model_name: str) -> str | None:
    """Log the winner's best checkpoint as a pyfunc model on the parent run and register it;
    its folder gets ``ftplat_task.json`` (the job's task) so the model serves that task."""
    import mlflow

    from ftplat.tracking.pyfunc_model import (build_model_code_path, build_package_dir, build_pip_requirements,
                                              run_infer_signature)

    winner = summary.winner
    if not winner or not winner.best_checkpoint:
        return None
    if not winner.best_checkpoint.exists:
        logger.warning("Not registering the winner: its best checkpoint %s is gone", winner.best_checkpoint.path)
        return None
    config_uri = build_sweep_config_uri(summary.sweep_path)
    sweep_config = read_json(config_uri) if path_exists(config_uri) else None
    task_settings = build_task_settings(sweep_config, summary)
    with tempfile.TemporaryDirectory() as tmp, scoped_tracking_uri(tracking["tracking_uri"]):
        # The winner's own job (its searched model.peft values); a peft winner is registered
        # merged: it serves like any other model.
        job = (sweep_config or {}).get("job") or {}
        job = build_trial_job(job, winner.hyperparameters) if job else job
        run_write_model_dir(winner.best_checkpoint.path, tmp, job or None)
        run_write_task_file(tmp, task_settings)
        text_pair = bool((job.get("data") or {}).get("text_pair_column"))
        example, signature = run_infer_signature(tmp, text_pair=text_pair)
        with mlflow.start_run(run_id=tracking["parent_run_id"]):
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=build_model_code_path(),
                artifacts={"hf_model": tmp},
                registered_model_name=model_name,
                pip_requirements=build_pip_requirements(uses_peft=bool((job.get("model") or {}).get("peft"))),
                # The model's class and its task's pipeline are ftplat code, which no package index
                # holds: the package travels inside the model, and MLflow puts it on sys.path at load.
                code_paths=[build_package_dir()],
                signature=signature,
                input_example=example,
            )
    version = str(info.registered_model_version)
    client = build_client(tracking["tracking_uri"])
    for key, value in {
        "ftplat.sweep": summary.sweep_name,
        "ftplat.trial_id": winner.trial_id,
        "ftplat.task": task_settings["type"],
        "scope": summary.scope,
        f"{summary.objective.metric}.{summary.scope}": str(winner.score),
        "checkpoint": winner.best_checkpoint.path,
    }.items():
        client.set_model_version_tag(model_name, version, key, value)
    logger.info("Registered %s version %s", model_name, version)
    return version


def build_trials_tracking_error(summary: SweepSummary) -> str | None:
    """One line on the MLflow calls the trials lost (their ``trial_result.json``), None if none."""
    lost = [(t.trial_id, t.train_result["tracking_errors"]) for t in summary.trials
            if t.train_result and (t.train_result.get("tracking_errors") or {}).get("count")]
    if not lost:
        return None
    first = next((e["first_error"] for _, e in lost if e.get("first_error")), "unknown error")
    return (f"{sum(e['count'] for _, e in lost)} MLflow call(s) failed or skipped in trial(s) "
            f"{', '.join(trial_id for trial_id, _ in lost)} (first error: {first})")


#: The cost fields logged as MLflow metrics (``cost.<field>``), on trial runs and on the parent.
COST_METRICS = ("cpu_seconds", "gpu_seconds", "wall_s", "trial_wall_s", "storage_bytes")


def build_cost_metrics(cost: dict[str, Any] | None) -> list:
    from mlflow.entities import Metric

    return [Metric(f"cost.{k}", float(cost[k]), 0, 0) for k in COST_METRICS
            if cost and isinstance(cost.get(k), (int, float))]


def run_finish_sweep(tracking: dict[str, str], summary: SweepSummary, *,
                     registered_model_name: str | None) -> str | None:
    """Final trial metrics and statuses, then the parent's winner, report plot and model.

    Never raises for MLflow: the summary is the sweep's record, written whatever happens here.
    Returns None, or one line on what tracking lost during the sweep (the trials' failed calls,
    the error that stopped this step). The parent run ends FAILED when tracking lost anything,
    retention failed or no trial scored, FINISHED otherwise.
    """
    trials_error = build_trials_tracking_error(summary)
    sweep_failed = bool(trials_error or summary.retention_error or summary.winner is None)
    guard = TrackingGuard("closing the sweep", quiet=True)
    guard.call(_run_finish_steps, tracking, summary, registered_model_name=registered_model_name,
               status="FAILED" if sweep_failed else "FINISHED")
    if guard.failed:
        run_end_parent(tracking, "FAILED")
    errors = [trials_error, guard.first_error and f"closing the sweep: {guard.first_error}"]
    return "; ".join(e for e in errors if e) or None


def _run_finish_steps(tracking: dict[str, str], summary: SweepSummary, *, registered_model_name: str | None,
                      status: str) -> None:
    from mlflow.entities import Metric, Param

    client = build_client(tracking["tracking_uri"])
    for record in summary.trials:
        run_id = find_trial_run_id(record.train_run_path) if record.train_run_path else None
        if run_id is None:  # the trial never started, or tracking failed when it did
            continue
        scores = [Metric(f"score.{s}", float(v), 0, 0) for s, v in record.scores.items() if is_finite_score(v)]
        scores += build_cost_metrics(record.cost)
        if scores:
            client.log_batch(run_id, metrics=scores)
        client.set_tag(run_id, "ftplat.tune_status", record.status)
        trial_status = build_trial_status(record)
        if client.get_run(run_id).info.status != trial_status:
            client.set_terminated(run_id, trial_status)

    parent = tracking["parent_run_id"]
    client.log_dict(parent, redact_config(summary.to_dict()), SUMMARY_FILE)
    winner = summary.winner
    if winner and is_finite_score(winner.score):
        client.log_batch(parent, metrics=[Metric(f"winner.{summary.objective.metric}.{summary.scope}",
                                                 float(winner.score), 0, 0)],
                         params=[Param("winner.trial_id", winner.trial_id)])
        client.set_tag(parent, "ftplat.winner", winner.trial_id)
    if build_cost_metrics(summary.cost):
        client.log_batch(parent, metrics=build_cost_metrics(summary.cost))
    test_metrics = [Metric(f"winner.{name}", float(value), 0, 0)
                    for name, value in ((summary.test or {}).get("metrics") or {}).items()
                    if isinstance(value, (int, float)) and is_finite_score(value)]
    if test_metrics:
        client.log_batch(parent, metrics=test_metrics)
    selection = ((summary.data or {}).get("eval") or {}).get("split") or (summary.data or {}).get("selection")
    if selection:
        client.set_tag(parent, "ftplat.selection", str(selection))
    config_uri = build_sweep_config_uri(summary.sweep_path)
    space = ((read_json(config_uri) if path_exists(config_uri) else {}).get("search_space") or {}).get("parameters")
    with tempfile.TemporaryDirectory() as tmp:
        plot = os.path.join(tmp, "sweep_report.png")
        run_write_report_figure(summary, plot, space)
        client.log_artifact(parent, plot)
    winner_run = summary.winner_trial() if winner else None
    winner_run_id = find_trial_run_id(winner_run.train_run_path) if winner_run and winner_run.train_run_path else None
    if winner_run_id:  # the trial to open among the children
        client.set_tag(winner_run_id, "ftplat.winner", "true")
    version = (run_register_winner(tracking, summary, registered_model_name)
               if registered_model_name and winner else None)
    if version and winner_run_id:
        client.set_tag(winner_run_id, "ftplat.registered_model", registered_model_name)
        client.set_tag(winner_run_id, "ftplat.registered_model_version", version)
        client.set_model_version_tag(registered_model_name, version, "ftplat.winner_run_id", winner_run_id)
    client.set_terminated(parent, status)
