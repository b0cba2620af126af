"""``run_sweep``: tokenize once, run Tune + Optuna over TorchTrainer trials, summarise."""

from __future__ import annotations

import datetime as dt
import logging
import os
import time

import ray
from ray import tune

from ftplat.checkpoints.gc import read_gc_plan, run_gc_plan
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.config.schema import JobConfig, looks_like_local_path
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.errors import UserError
from ftplat.layout import build_sweep_config_uri
from ftplat.ray_internals import check_ray_version, read_dashboard_url
from ftplat.records import OBJECTIVE_KEY, SweepSummary
from ftplat.runtime import run_ray_init
from ftplat.storage import check_writable, join_uri, path_exists, read_json, write_json
from ftplat.tracking.report import build_parent_params, run_finish_sweep
from ftplat.tracking.runs import build_client, check_tracking_reachable, redact_text, run_start_parent
from ftplat.tune.live_retention import LiveRetentionCallback
from ftplat.tune.spaces import build_max_evaluations, build_param_space, build_scheduler, build_search_alg
from ftplat.tune.summary import format_summary_table, read_sweep_summary
from ftplat.tune.trial import train_driver_fn
from ftplat.versions import collect_versions
from ftplat.zero.config import build_sweep_deepspeed_configs

logger = logging.getLogger(__name__)


def build_sweep_name(job: JobConfig) -> str:
    if job.storage.sweep_name:
        return job.storage.sweep_name
    return "sweep-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def build_ephemeral_path_warnings(job: JobConfig, cwd: str) -> list[str]:
    """Paths that would land in a ``ray job submit`` working-dir copy, which Ray deletes."""
    if "working_dir_files" not in cwd:
        return []
    found = []
    if job.storage.storage_path.startswith(cwd):
        found.append(f"storage.storage_path {job.storage.storage_path!r}")
    if job.tracking.enabled:
        from ftplat.tracking.runs import resolve_tracking_uri

        uri = resolve_tracking_uri(job.tracking)
        if uri.startswith("sqlite:///") and uri[len("sqlite:///"):].startswith(cwd):
            found.append(f"tracking.tracking_uri {uri!r}")
    return [f"{item} is inside the job's working-dir copy, which Ray deletes after the job; "
            "give an absolute path (or an s3:// / http:// URI)" for item in found]


def check_sweep_preconditions(job: JobConfig, space: SearchSpaceConfig, sweep_name: str, *, resume: bool) -> str:
    """Checks that need no cluster; returns the sweep's storage URI. Raises ``UserError``."""
    if looks_like_local_path(job.model.name_or_path) and not os.path.isdir(job.model.name_or_path):
        raise UserError(
            f"model.name_or_path {job.model.name_or_path!r} does not exist; give a model directory or a hub id"
        )
    build_scheduler(space, job)  # ASHA settings that contradict the job config
    sweep_path = join_uri(job.storage.storage_path, sweep_name)
    exists = path_exists(build_sweep_config_uri(sweep_path))
    if exists and not resume:
        raise UserError(
            f"storage.sweep_name {sweep_name!r} already exists under {job.storage.storage_path}; "
            "pass --resume to continue it, or choose another storage.sweep_name"
        )
    if resume and not exists:
        raise UserError(f"--resume: no sweep {sweep_name!r} under {job.storage.storage_path} to resume")
    check_writable(job.storage.storage_path)
    if job.tracking.enabled:
        check_tracking_reachable(job.tracking)
    return sweep_path


def check_cluster_fits(job: JobConfig) -> None:
    """A trial that can never be placed would leave the sweep pending forever: refuse it."""
    res, total = job.resources, ray.cluster_resources()
    if res.cpus_per_trial > total.get("CPU", 0):
        raise UserError(
            f"resources: a trial needs {res.cpus_per_trial:g} CPUs (trial_driver_cpus {res.trial_driver_cpus:g} + "
            f"num_workers {res.num_workers} x cpus_per_worker {res.cpus_per_worker:g}) but the cluster has "
            f"{total.get('CPU', 0):g}; lower num_workers or cpus_per_worker, or add nodes"
        )
    if res.use_gpu and res.num_workers * res.gpus_per_worker > total.get("GPU", 0):
        raise UserError(
            f"resources: a trial needs {res.num_workers * res.gpus_per_worker:g} GPUs but the cluster has "
            f"{total.get('GPU', 0):g}; set resources.use_gpu=false or add GPU nodes"
        )


def build_resumed_configs(job: JobConfig, space: SearchSpaceConfig, sweep_path: str) -> tuple[JobConfig, SearchSpaceConfig]:
    """A resumed sweep continues with the configs it started with (trials already run used
    them); a different config on the command line is reported and ignored."""
    stored = read_json(build_sweep_config_uri(sweep_path))
    stored_job = JobConfig.model_validate(stored["job"])
    stored_space = SearchSpaceConfig.model_validate(stored["search_space"])
    if stored_job != job or stored_space != space:
        logger.warning("--resume: continuing with the configs stored in %s; the ones given now differ and are ignored",
                       build_sweep_config_uri(sweep_path))
    return stored_job, stored_space


def build_tuner(job: JobConfig, space: SearchSpaceConfig, *, sweep_name: str, sweep_path: str,
                data_ref: ray.ObjectRef, tracking: dict[str, str] | None, resume: bool,
                deepspeed_configs: dict[str, dict] | None = None) -> tune.Tuner:
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
            tracking=tracking,
            deepspeed_configs=deepspeed_configs or {},
        ),
        {"CPU": job.resources.trial_driver_cpus},
    )
    if resume:
        return tune.Tuner.restore(sweep_path, trainable=trainable, resume_unfinished=True, resume_errored=True)
    return tune.Tuner(
        trainable,
        param_space=build_param_space(space),
        tune_config=tune.TuneConfig(
            metric=OBJECTIVE_KEY,
            mode=space.objective.mode,
            search_alg=build_search_alg(space, job.resources.max_concurrent_trials),
            scheduler=build_scheduler(space, job),
            num_samples=space.num_samples,
        ),
        run_config=tune.RunConfig(name=sweep_name, storage_path=job.storage.storage_path, verbose=1,
                                  callbacks=build_sweep_callbacks(job, space, sweep_path)),
    )


def build_sweep_callbacks(job: JobConfig, space: SearchSpaceConfig, sweep_path: str) -> list[tune.Callback]:
    if not job.retention.apply_during_sweep:
        return []
    return [LiveRetentionCallback(
        sweep_path=sweep_path,
        policy=build_retention_policy(job),
        objective={"metric": space.objective.metric, "mode": space.objective.mode, "scope": space.scope},
        metric_for_best_model=job.training.metric_for_best_model,
        greater_is_better=job.training.resolved_greater_is_better,
    )]


def build_retention_policy(job: JobConfig) -> RetentionPolicy:
    r = job.retention
    return RetentionPolicy(save_total_limit=job.training.save_total_limit, keep_top_k_trials=r.keep_top_k_trials,
                           keep_trial_best=r.keep_trial_best, keep_trial_latest=r.keep_trial_latest)


def run_sweep_retention(job: JobConfig, sweep_path: str, summary: SweepSummary) -> dict[str, int]:
    """Apply the retention policy to the finished sweep; return the action counts."""
    plan = read_gc_plan(sweep_path, build_retention_policy(job), job.training.resolved_greater_is_better,
                         summary=summary)
    run_gc_plan(plan, dry_run=not job.retention.apply_at_end)
    counts = {a: sum(1 for x in plan if x.action == a) for a in sorted({x.action for x in plan})}
    logger.info("Checkpoint retention (%s): %s", "applied" if job.retention.apply_at_end else "dry run", counts)
    return counts


def run_sweep(job: JobConfig, space: SearchSpaceConfig, *, resume: bool = False) -> SweepSummary:
    """Run a whole sweep and return its summary (also written to ``<sweep>/summary.json``).

    Validation and storage checks happen before Ray starts, so a bad config costs nothing.
    """
    check_ray_version()
    sweep_name = build_sweep_name(job)
    sweep_path = check_sweep_preconditions(job, space, sweep_name, resume=resume)
    for warning in build_ephemeral_path_warnings(job, os.getcwd()):
        logger.warning(warning)
    if resume:
        job, space = build_resumed_configs(job, space, sweep_path)
    deepspeed_configs = build_sweep_deepspeed_configs(job, space.parameters)
    started = time.perf_counter()
    tokenized = build_tokenized_tables(job.data, job.model)

    started_ray = run_ray_init(job.resources)
    tracking = None
    try:
        check_cluster_fits(job)
        config_json = {"job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json")}
        if not resume:
            write_json(build_sweep_config_uri(sweep_path), config_json)
        if job.tracking.enabled:
            tracking = run_start_parent(
                job.tracking, sweep_name=sweep_name, sweep_path=sweep_path,
                params=build_parent_params(config_json["job"], config_json["search_space"]),
                config_json=config_json, dashboard_url=read_dashboard_url(),
            )
        data_ref = ray.put(tokenized.tables())
        tuner = build_tuner(job, space, sweep_name=sweep_name, sweep_path=sweep_path,
                            data_ref=data_ref, tracking=tracking, resume=resume,
                            deepspeed_configs=deepspeed_configs)
        logger.info("Sweep %s: %d trials, storage %s", sweep_name, space.num_samples, redact_text(sweep_path))
        try:
            grid = tuner.fit()
        except BaseException:
            if tracking:
                build_client(tracking["tracking_uri"]).set_terminated(tracking["parent_run_id"], "FAILED")
            raise
        summary = read_sweep_summary(
            tune.ExperimentAnalysis(grid.experiment_path, storage_filesystem=grid.filesystem),
            sweep_name=sweep_name,
            sweep_path=sweep_path,
            job=job,
            space=space,
            data=tokenized.stats,
            wall_seconds=round(time.perf_counter() - started, 1),
            versions=collect_versions(),
            mlflow=tracking,
        )
        summary.checkpoint_gc = run_sweep_retention(job, sweep_path, summary)
        if tracking:
            run_finish_sweep(tracking, summary, registered_model_name=job.tracking.registered_model_name,
                             full_length=build_max_evaluations(job))
    finally:
        if started_ray:
            ray.shutdown()
    summary_uri = summary.write()
    print(format_summary_table(summary), flush=True)
    print(f"Summary: {redact_text(summary_uri)}", flush=True)
    return summary
