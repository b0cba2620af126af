"""``run_sweep``: pre-flight checks, then Tune + Optuna over Ray Train trials, and the summary."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time

import ray
from ray import tune

from ftplat.checkpoints.gc import build_plan_counts, read_gc_plan, run_gc_plan
from ftplat.checkpoints.listing import read_current_checkpoint_existence
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.environment import scoped_environ
from ftplat.errors import SweepInterrupted
from ftplat.layout import DATA_FINGERPRINTS, build_summary_uri, build_sweep_config_uri
from ftplat.ray_internals import read_dashboard_url, run_start_autoscaling_coordinator
from ftplat.records import OBJECTIVE_KEY, SweepSummary
from ftplat.runtime import build_trial_driver_resources, check_trial_fits_nodes, read_alive_node_resources, run_ray_init
from ftplat.storage import check_writable, write_json
from ftplat.tracking.params import build_parent_params
from ftplat.tracking.report import run_finish_sweep
from ftplat.tracking.runs import format_error, redact_config, redact_text, run_end_parent, run_start_parent
from ftplat.tracking.trial_runs import run_start_trial_runs_actor
from ftplat.tune.accounting import build_sweep_cost, read_folder_bytes
from ftplat.tune.console import (TUNE_FIT_ENV, TrialEndLogCallback, build_progress_reporter, build_resume_args,
                                 check_sweep_ended, sigterm_as_ctrl_c)
from ftplat.tune.live_retention import LiveRetentionCallback
from ftplat.tune.placement_groups import PlacementGroupCleanupCallback
from ftplat.tune.preflight import build_largest_trial_job, check_largest_trial_fits, check_sweep_preflight
from ftplat.tune.scratch import ScratchCleanupCallback
from ftplat.tune.shared_storage import check_storage_shared
from ftplat.tune.spaces import build_param_space, build_scheduler, build_search_alg
from ftplat.tune.study import (StudyUploadCallback, build_dashboard_command, run_open_study_storage,
                               is_local_storage, run_clear_stale_study, run_download_study)
from ftplat.tune.summary import format_summary_table, read_sweep_summary
from ftplat.tune.test_score import run_test_score
from ftplat.versions import collect_versions

logger = logging.getLogger(__name__)


def check_cluster_fits(job: JobConfig) -> None:
    """A trial that can never be placed would leave the sweep pending forever: refuse it."""
    check_trial_fits_nodes(job.resources, read_alive_node_resources(), fp16=job.training.fp16)


def build_tuner(job: JobConfig, space: SearchSpaceConfig, *, sweep_name: str, sweep_path: str,
                data_ref: ray.ObjectRef, trial_runs: ray.actor.ActorHandle | None, resume: bool,
                deepspeed_configs: dict[str, dict] | None = None) -> tune.Tuner:
    # Imports torch (seconds): a sweep refused by its pre-flight never needs it.
    from ftplat.tune.trial import train_driver_fn

    objective = {"metric": space.objective.metric, "mode": space.objective.mode, "scope": space.scope}
    trainable = tune.with_resources(
        tune.with_parameters(
            train_driver_fn,
            job=job.model_dump(),
            objective=objective,
            sweep_path=sweep_path,
            # Wrapped in a list so Tune passes the reference on instead of fetching the data
            # into every trial driver; workers fetch it from the object store.
            data_ref=[data_ref],
            trial_runs=trial_runs,
            deepspeed_configs=deepspeed_configs or {},
            # Train's state actor reads the dashboard's state API: without a dashboard it only
            # logs connection errors.
            track_state=bool(read_dashboard_url()),
        ),
        build_trial_driver_resources(job.resources),
    )
    if resume:
        return tune.Tuner.restore(sweep_path, trainable=trainable, resume_unfinished=True, resume_errored=True)
    return tune.Tuner(
        trainable,
        param_space=build_param_space(space),
        tune_config=tune.TuneConfig(
            metric=OBJECTIVE_KEY,
            mode=space.objective.mode,
            search_alg=build_search_alg(space, job.resources.max_concurrent_trials, study_name=sweep_name,
                                        study_storage=run_open_study_storage(sweep_path)
                                        if space.algorithm == "optuna" else None),
            scheduler=build_scheduler(space, job),
            num_samples=space.num_samples,
        ),
        run_config=tune.RunConfig(name=sweep_name, storage_path=job.storage.storage_path, verbose=1,
                                  callbacks=build_sweep_callbacks(job, space, sweep_path),
                                  progress_reporter=build_progress_reporter(space)),
    )


def build_sweep_callbacks(job: JobConfig, space: SearchSpaceConfig, sweep_path: str) -> list[tune.Callback]:
    # Stopped and failed trials leave their node-local scratch behind (their workers are killed),
    # and their Train runs' placement groups (their controllers are killed).
    callbacks: list[tune.Callback] = [PlacementGroupCleanupCallback(), ScratchCleanupCallback(sweep_path),
                                      TrialEndLogCallback(sweep_path=sweep_path, metric=space.objective.metric,
                                                          scope=space.scope)]
    if space.algorithm == "optuna" and not is_local_storage(sweep_path):
        callbacks.append(StudyUploadCallback(sweep_path))
    if not job.retention.apply_during_sweep:
        return callbacks
    return [*callbacks, LiveRetentionCallback(
        sweep_path=sweep_path,
        policy=build_retention_policy(job),
        objective={"metric": space.objective.metric, "mode": space.objective.mode, "scope": space.scope},
        metric_for_best_model=job.training.metric_for_best_model,
        greater_is_better=job.training.resolved_greater_is_better,
    )]


def build_retention_policy(job: JobConfig) -> RetentionPolicy:
    r = job.retention
    return RetentionPolicy(save_total_limit=job.training.save_total_limit, keep_top_k_trials=r.keep_top_k_trials,
                           keep_trial_best=r.keep_trial_best, keep_trial_latest=r.keep_trial_latest,
                           keep_optimizer_state=r.keep_optimizer_state)


def run_sweep_retention(job: JobConfig, sweep_path: str, summary: SweepSummary) -> dict[str, int]:
    """Apply the retention policy to the finished sweep; return the action counts."""
    plan = read_gc_plan(sweep_path, build_retention_policy(job), job.training.resolved_greater_is_better,
                         summary=summary)
    run_gc_plan(plan, dry_run=not job.retention.apply_at_end)
    counts = build_plan_counts(plan)
    logger.info("Checkpoint retention (%s): %s", "applied" if job.retention.apply_at_end else "dry run", counts)
    return counts


def run_fit(tuner: tune.Tuner) -> tune.ResultGrid:
    """``tuner.fit()``, then the Ctrl-C handler that was there before: Tune's stays installed
    after fit, so a Ctrl-C during the test score or the registration only printed Tune's "Stop
    signal received" and was ignored (a second one raised a bare traceback)."""
    before = signal.getsignal(signal.SIGINT)
    try:
        with scoped_environ(TUNE_FIT_ENV, keep_set=True):
            return tuner.fit()
    finally:
        if before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, before)


def run_sweep(job: JobConfig, space: SearchSpaceConfig, *, resume: bool = False) -> SweepSummary:
    """Run a whole sweep and return its summary (also written to ``<sweep>/summary.json``).

    The pre-flight (``check_sweep_preflight``) runs first, so bad input costs neither a Ray
    start nor a file in storage. Storage is written only once the trial is known to fit the
    cluster, which on an existing cluster needs the connection.
    """
    started = time.perf_counter()
    pre = check_sweep_preflight(job, space, resume=resume)
    job, space, sweep_name, sweep_path, deepspeed_configs = (pre.job, pre.space, pre.sweep_name, pre.sweep_path,
                                                             pre.deepspeed_configs)
    for warning in pre.warnings:
        logger.warning(warning)
    tables, data_stats = pre.tokenized.tables, pre.tokenized.stats
    del pre  # the tables' only reference is now ``tables``, dropped once they are in the object store

    # A local cluster is sized for the largest trial the search can reach.
    started_ray = run_ray_init(build_largest_trial_job(job, space)[0].resources)
    tracking = trial_runs = None
    stack = contextlib.ExitStack()
    stack.enter_context(sigterm_as_ctrl_c())
    try:
        check_largest_trial_fits(job, space, check_cluster_fits)
        check_writable(job.storage.storage_path)
        check_storage_shared(job.storage.storage_path)
        run_start_autoscaling_coordinator()
        config_json = {"job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json")}
        if not resume:
            write_json(build_sweep_config_uri(sweep_path), {**redact_config(config_json),
                                                            DATA_FINGERPRINTS: data_stats.get("fingerprints")})
        if job.tracking.enabled:
            tracking = run_start_parent(
                job.tracking, sweep_name=sweep_name, sweep_path=sweep_path,
                params=build_parent_params(config_json["job"], config_json["search_space"]),
                config_json=config_json, dashboard_url=read_dashboard_url(),
            )
            # Its process starts (imports MLflow, opens the store) beside the first trial's.
            trial_runs = run_start_trial_runs_actor(tracking)
        data_ref = ray.put(tables)
        # Workers read the object store's copy: the driver's would stay for the whole sweep.
        del tables
        if space.algorithm == "optuna" and resume:  # the driver's SQLite file, on object storage
            run_download_study(sweep_path)
        elif space.algorithm == "optuna":
            run_clear_stale_study(sweep_path)
        tuner = build_tuner(job, space, sweep_name=sweep_name, sweep_path=sweep_path,
                            data_ref=data_ref, trial_runs=trial_runs, resume=resume,
                            deepspeed_configs=deepspeed_configs)
        logger.info("Sweep %s: %d trials, storage %s", sweep_name, space.num_samples, redact_text(sweep_path))
        grid = run_fit(tuner)
        analysis = tune.ExperimentAnalysis(grid.experiment_path, storage_filesystem=grid.filesystem)
        check_sweep_ended(analysis.trials, sweep_name, space.num_samples, job.storage.storage_path)
        summary = read_sweep_summary(
            analysis,
            sweep_name=sweep_name,
            sweep_path=sweep_path,
            job=job,
            space=space,
            data=data_stats,
            wall_seconds=round(time.perf_counter() - started, 1),
            versions=collect_versions(),
            mlflow=redact_config(tracking),
        )
        summary.test = run_winner_test_score(job, summary, data_ref, data_stats)
        summary = run_close_sweep(job, summary, tracking)
    except BaseException as exc:
        # A started parent run never stays RUNNING: a failure anywhere after it (the object
        # store, Tune's restore, the study's download, fit) ends it; this call never raises, so
        # the sweep's own error is the one to see.
        if tracking:
            run_end_parent(tracking, "KILLED" if isinstance(exc, (SweepInterrupted, KeyboardInterrupt))
                           else "FAILED")
        if isinstance(exc, KeyboardInterrupt):  # outside fit: the trials' state is saved, the end is not
            raise SweepInterrupted(f"sweep {sweep_name} was interrupted (Ctrl-C) before its end (the test score, "
                                   "retention's final pass, the registered model); continue it with "
                                   f"{build_resume_args(sweep_name, job.storage.storage_path)}") from None
        raise
    finally:
        stack.close()
        if trial_runs is not None:
            # Every trial has ended: a sweep in a long-lived process leaves no actor behind. A
            # cluster already gone took it along, and must not hide the sweep's own error.
            with contextlib.suppress(Exception):
                ray.kill(trial_runs)
        if started_ray:
            ray.shutdown()
    print(format_summary_table(summary), flush=True)
    print(f"Summary: {redact_text(build_summary_uri(sweep_path))}", flush=True)
    if space.algorithm == "optuna":
        print(f"Optuna study: {redact_text(build_dashboard_command(sweep_path))}", flush=True)
    return summary


def run_winner_test_score(job: JobConfig, summary: SweepSummary, data_ref: ray.ObjectRef,
                          stats: dict) -> dict:
    """The test record; a failure is recorded (and makes ``ftplat sweep`` exit 1), never
    costing the sweep its summary."""
    try:
        return run_test_score(job, summary, data_ref, stats)
    except Exception as exc:
        logger.exception("Scoring the winner on the test split failed")
        return {"error": format_error(exc)}


def run_close_sweep(job: JobConfig, summary: SweepSummary, tracking: dict[str, str] | None) -> SweepSummary:
    """Write the summary, then run the final retention pass and close the sweep in MLflow,
    writing the summary again after each. A failure of either is recorded in the summary (and
    makes ``ftplat sweep`` exit 1); it never leaves the sweep without one."""
    summary.write()
    try:
        summary.checkpoint_gc = run_sweep_retention(job, summary.sweep_path, summary)
    except Exception as exc:  # storage (S3, NFS) errors included: the summary is the sweep's record
        summary.retention_error = format_error(exc)
        logger.exception("Checkpoint retention at the end of the sweep failed; `ftplat checkpoints gc %s` "
                         "applies the policy again", redact_text(summary.sweep_path))
    try:
        summary = read_current_checkpoint_existence(summary)
    except Exception as exc:  # the flags stay as they were read before retention
        summary.retention_error = summary.retention_error or f"re-reading the best checkpoints: {format_error(exc)}"
        logger.exception("Could not re-read which best checkpoints exist after retention")
    try:
        summary = build_sweep_cost(summary, *read_folder_bytes(summary.sweep_path))
    except Exception:  # noqa: BLE001 - what the sweep holds is information; a failed listing leaves it out
        logger.warning("Could not measure what the sweep keeps in storage", exc_info=True)
    summary.write()
    if tracking:
        summary.tracking_error = run_finish_sweep(tracking, summary,
                                                  registered_model_name=job.tracking.registered_model_name)
        if summary.tracking_error:
            logger.warning("MLflow tracking failed: %s; summary.json and the checkpoints are complete, "
                           "the MLflow runs are not", summary.tracking_error)
            summary.write()
    return summary
