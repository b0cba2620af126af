"""``train_driver_fn``: one Tune trial drives one Ray Train run (the Train V2 pattern)."""

from __future__ import annotations

import logging
import os
import time
import warnings
from typing import TYPE_CHECKING, Any

import ray.train
import ray.tune
from ray.train.constants import RAY_TRAIN_ENABLE_STATE_TRACKING

from ftplat.checkpoints.gc import run_repair_snapshot
from ftplat.config.loading import build_trial_job
from ftplat.config.schema import JobConfig
from ftplat.layout import build_train_run_name, build_train_run_uri, build_trial_result_uri, read_trial_finished
from ftplat.scoring import build_evaluation_report
from ftplat.ray_internals import (PREEMPTION_WATCHER_ENV, TRAIN_POLL_INTERVAL_ENV, build_lean_trainer_class,
                                  run_disable_train_print_patch)
from ftplat.storage import join_uri, write_json
from ftplat.tracking.guard import TrackingGuard
from ftplat.tracking.trial_runs import RemoteTrialRuns
from ftplat.tune.report_channel import ReportChannel
from ftplat.tune.run_history import read_finished_evaluations
from ftplat.tune.timeline import build_trial_timeline
from ftplat.train.entry import train_fn_per_worker
from ftplat.zero.config import build_trial_deepspeed_config

if TYPE_CHECKING:
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

logger = logging.getLogger(__name__)

# Train's own default data config sets the option Ray Data deprecates: the warning names nothing
# a user can change, in every trial's log. Set when a trial driver's process unpickles its
# function, before the threads whose ``catch_warnings`` could restore the filters from before.
warnings.filterwarnings("ignore", message=r"`ExecutionOptions\.exclude_resources` is deprecated",
                        category=DeprecationWarning)

#: Seconds between a Train controller's polls of its workers (a cluster's own setting wins).
TRAIN_POLL_INTERVAL_S = "0.25"
#: TrainingArguments' ddp_timeout default (seconds), Train's TorchConfig default too.
DDP_TIMEOUT_DEFAULT_S = 1800


def build_ddp_timeout_s(job: JobConfig) -> int:
    """The process group's timeout: ``training.hf_args.ddp_timeout`` as HF reads it (1800 s)."""
    return int(job.training.hf_args.get("ddp_timeout", DDP_TIMEOUT_DEFAULT_S))


def build_trainer(
    job: JobConfig,
    *,
    run_name: str,
    sweep_path: str,
    train_loop_config: dict[str, Any],
    callbacks: list,
) -> DataParallelTrainer:
    """The trial's Train V2 trainer: a ``TorchTrainer`` when its workers need a process group."""
    res = job.resources
    per_worker = {"CPU": res.cpus_per_worker}
    if res.use_gpu:
        per_worker["GPU"] = res.gpus_per_worker
    # DeepSpeed wants its distributed setup even for one worker; what the lean classes leave
    # out, and why, is in build_lean_trainer_class.
    process_group = res.num_workers > 1 or train_loop_config.get("deepspeed") is not None
    group_kwargs = {}
    if process_group:
        from ray.train.torch import TorchConfig

        # Train creates the process group before the Trainer exists, so HF's own ddp_timeout
        # (the collectives' timeout: a long save or evaluation on one rank) is Train's to set.
        group_kwargs["torch_config"] = TorchConfig(timeout_s=build_ddp_timeout_s(job))
    return build_lean_trainer_class(process_group=process_group)(
        train_fn_per_worker,
        train_loop_config=train_loop_config,
        **group_kwargs,
        scaling_config=ray.train.ScalingConfig(
            num_workers=res.num_workers, use_gpu=res.use_gpu, resources_per_worker=per_worker
        ),
        run_config=ray.train.RunConfig(
            name=run_name,
            storage_path=sweep_path,
            failure_config=ray.train.FailureConfig(max_failures=res.max_failures),
            # Every report carries the metric, so the ranking never meets a missing score.
            # Retention in storage is ftplat's (HF save_total_limit semantics), not Ray's.
            checkpoint_config=ray.train.CheckpointConfig(
                num_to_keep=None,
                checkpoint_score_attribute=job.training.metric_for_best_model,
                checkpoint_score_order="max" if job.training.resolved_greater_is_better else "min",
            ),
            callbacks=callbacks,
        ),
    )


def train_driver_fn(config: dict[str, Any], *, job: dict[str, Any], objective: dict[str, Any],
                    sweep_path: str, data_ref: list, trial_runs: ray.actor.ActorHandle | None = None,
                    deepspeed_configs: dict[str, dict] | None = None, track_state: bool = True) -> None:
    """Run one trial: apply the sampled values to the job config and fit its Train trainer.

    ``config`` is Tune's sampled ``{dotted.path: value}``; the keyword arguments are bound
    once per sweep with ``tune.with_parameters``; ``deepspeed_configs`` maps each
    ``training.deepspeed`` value the trials can take to its checked config (a preset as shipped,
    fitted here to the trial's values);
    ``track_state`` whether the cluster has a dashboard to show Train's state;
    ``trial_runs`` the sweep's ``TrialRuns`` actor, which makes the trial's MLflow calls (None:
    tracking is off).
    """
    started, clock = time.perf_counter(), {"started": time.time()}
    run_disable_train_print_patch()
    # The dashboard's Train state API lists a run only when its trainer tracks state (off in
    # Ray 2.60 by default); each trial's run is then listed under its name, train-<trial id>.
    # Read when the trainer is built, in this process; a cluster's own setting wins.
    # ``track_state`` is false on a cluster without a dashboard.
    if track_state:
        os.environ.setdefault(RAY_TRAIN_ENABLE_STATE_TRACKING, "1")
    # The controller notices the end of training at its next poll of the workers (every 2 s by
    # default), and each trial waits for that; a poll is one small actor call.
    os.environ.setdefault(TRAIN_POLL_INTERVAL_ENV, TRAIN_POLL_INTERVAL_S)
    # Ray Train's preemption watcher is one more process per trial (its imports alone take
    # about 2 s of a core while the worker starts); it only logs draining nodes and answers
    # ``ray.train.get_preemption_info()``, which ftplat's workers never ask. A node's loss is
    # handled by resources.max_failures either way. A cluster's own setting wins.
    os.environ.setdefault(PREEMPTION_WATCHER_ENV, "0")
    trial_id = ray.tune.get_context().get_trial_id()
    trial_job = JobConfig.model_validate(build_trial_job(job, config))
    run_name = build_train_run_name(trial_id)
    finished = read_finished_report(sweep_path, trial_id, objective)
    if finished is not None:
        # The trial trained to its end, but the sweep stopped before Tune saved it as
        # terminated: on --resume its last evaluation ends it again, with nothing trained
        # and nothing in storage or MLflow touched.
        logger.info("Trial %s had finished before the sweep stopped; its last evaluation (step %s) is reported "
                    "again, nothing is trained", trial_id, finished["step"])
        ray.tune.report(finished)
        return
    loop_config = {"job": trial_job.model_dump(), "objective": objective, "data_ref": data_ref,
                   "deepspeed": build_trial_deepspeed_config(deepspeed_configs or {}, trial_job)}
    # A tracking server that fails costs the trial its MLflow run, never the trial itself.
    guard = TrackingGuard(f"in trial {trial_id}'s driver")
    run_ref = None
    if trial_runs is not None:
        # Training starts without waiting for the run: rank 0 gets the call's reference and
        # resolves it in its logging thread.
        run_ref = trial_runs.start_trial.remote(trial_id=trial_id, run_uri=join_uri(sweep_path, run_name),
                                                params=config)
        loop_config["tracking"] = {"actor": trial_runs, "run_ref": [run_ref], "searched": sorted(config)}
    # Each of the controller's reports reaches Tune through this channel (why not Ray's
    # TuneReportCallback: ftplat.tune.report_channel).
    channel = ReportChannel()
    trainer = build_trainer(
        trial_job,
        run_name=run_name,
        sweep_path=sweep_path,
        train_loop_config=loop_config,
        callbacks=[channel.build_callback()],
    )
    repaired = run_repair_snapshot(join_uri(sweep_path, run_name))
    if repaired:
        logger.info("Trial %s: dropped %d checkpoint(s) deleted by retention from the run snapshot before "
                    "restoring: %s", trial_id, len(repaired), ", ".join(sorted(repaired)))
    clock["fit_started"] = time.time()
    result = channel.run_fit(trainer, report=ray.tune.report)
    clock["fit_ended"] = time.time()
    record = dict(result.return_value or {})
    if trial_runs is not None:
        runs = RemoteTrialRuns(trial_runs)
        run_id = guard.call(runs.get, run_ref)  # a run that was not created counts here, not on rank 0
        guard.add(record.get("tracking_errors"))
        if run_id:
            # The run ends with the trial; the sweep driver adds the scope scores at the end and
            # marks trials that never got here (stopped by ASHA, failed).
            guard.call(runs.call, "set_terminated", run_id, "FINISHED")
        record["tracking_errors"] = guard.to_dict()
    # Rank 0's return value (train runtime, throughput, best step) is kept beside the
    # checkpoints; returning it would make Tune record one more result row.
    clock["ended"] = time.time()
    record["timeline_s"] = build_trial_timeline(clock, record.pop("worker_clock", None))
    write_json(build_trial_result_uri(join_uri(sweep_path, run_name)),
               {**record, "driver_wall_s": round(time.perf_counter() - started, 3)})


def read_finished_report(sweep_path: str, trial_id: str, objective: dict[str, Any]) -> dict | None:
    """The report of a trial's last evaluation when its driver had written the training record
    (``trial_result.json``: it trained to its end), else None. Also None when its evaluations
    cannot be read: the Train run is then restored and reports it (``RayScopeReportCallback``)."""
    if not read_trial_finished(sweep_path, trial_id):
        return None
    found = read_finished_evaluations(build_train_run_uri(sweep_path, trial_id), objective["metric"])
    if found is None:
        return None
    evals, train_loss = found
    step = evals[-1].get("step")
    if step is None:
        return None
    return build_evaluation_report(evals, train_loss=train_loss, metric=objective["metric"], mode=objective["mode"],
                                   scope=objective["scope"], step=int(step))


class TrialNamedActor:
    """Mixed into the class Tune makes of ``train_driver_fn`` (Tune's ``__mixins__`` hook).

    Ray shows an actor's repr in the dashboard's Actors page ("Repr") and prefixes its log lines
    with it; Tune's class reprs as its function's name (``self._name``), the same for every trial.
    Set per instance, once Tune has given the actor its trial, it names the trial instead.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._name = build_trial_repr(self.trial_id)


def build_trial_repr(trial_id: str) -> str:
    return f"trial-{trial_id}"


train_driver_fn.__mixins__ = (TrialNamedActor,)
