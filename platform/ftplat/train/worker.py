"""The Hugging Face Trainer inside one Ray Train worker (``train_fn_per_worker`` calls ``run_worker``)."""

from __future__ import annotations

import logging
import os
import resource
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import ray
import ray.train
import torch
from ray.train.huggingface.transformers import prepare_trainer
from transformers import Trainer, TrainerCallback, set_seed
from transformers.trainer_utils import TrainOutput

from ftplat.adapters import count_parameters
from ftplat.config.schema import JobConfig
from ftplat.data.preparation import EVAL, TRAIN, build_torch_dataset
from ftplat.data.tokenizer import build_tokenizer
from ftplat.tracking.callback import MlflowTrialCallback, read_tracking_errors
from ftplat.tracking.trial_runs import RemoteTrialRuns
from ftplat.train.arguments import build_training_arguments
from ftplat.tasks import build_task
from ftplat.train.loss_kwargs import set_loss_kwargs_path
from ftplat.train.modeling import build_model
from ftplat.train.progress import ProgressLineCallback, run_replace_printer
from ftplat.train.reporting import RayScopeReportCallback
from ftplat.train.step_time import StepTimeCallback
from ftplat.train.scratch import build_scratch_dir, run_remove_scratch
from ftplat.zero.runtime import build_deepspeed_record, run_prepare_deepspeed, run_skip_unused_deepspeed_import

logger = logging.getLogger(__name__)


def build_trainer(
    job: JobConfig,
    *,
    train_table: pa.Table | None,
    eval_table: pa.Table,
    output_dir: str,
    callbacks: Sequence[TrainerCallback] = (),
    deepspeed: Any = None,
    report_to: list[str] | None = None,
    **trainer_kwargs: Any,
) -> Trainer:
    """The Hugging Face ``Trainer`` of one trial: ftplat's TrainingArguments, the model's
    tokenizer, and the collator, model and metrics of the job's task. ``eval_table`` may be
    the test split's (scoring a checkpoint).

    The model is built here from ``job.model`` unless ``trainer_kwargs`` bring their own
    ``model`` or ``model_init`` (the plain-HF benchmark baselines do); the rest of
    ``trainer_kwargs`` go to ``Trainer`` as they are.
    """
    # The arguments come before the model: under ZeRO-3 they register the DeepSpeed config
    # that makes from_pretrained partition the weights across workers as it loads them
    # (deepspeed.zero.Init); a model loaded first is whole on every worker. HF holds that
    # registration by weak reference, so ``args`` must stay referenced (the Trainer keeps it).
    args = build_training_arguments(job, output_dir=output_dir, report_to=report_to, deepspeed=deepspeed)
    task = build_task(job)
    tokenizer = task.prepare_tokenizer(build_tokenizer(job.model))
    if "model" not in trainer_kwargs and "model_init" not in trainer_kwargs:
        # Trainer seeds only in its __init__, after the model exists: without this the new
        # classifier head differs between two trials with the same values (and between reruns).
        set_seed(job.training.seed)
        trainer_kwargs["model"] = build_model(job, tokenizer)
    trainer_kwargs.setdefault("preprocess_logits_for_metrics", task.build_logits_reducer())
    return set_loss_kwargs_path(Trainer(
        args=args,
        train_dataset=build_torch_dataset(train_table) if train_table is not None else None,
        # Seeded by a data setting, which no trial varies (training.seed can be searched).
        eval_dataset=build_torch_dataset(task.build_evaluation_table(eval_table, tokenizer,
                                                                     seed=job.data.validation.seed)),
        processing_class=tokenizer,
        data_collator=task.build_collator(tokenizer),
        compute_metrics=task.compute_metrics,
        callbacks=list(callbacks),
        **trainer_kwargs,
    ))


def run_worker(config: dict[str, Any], *, entered: float | None = None) -> dict[str, Any]:
    """Train one trial's model on this worker.

    ``config`` holds plain data only: ``job`` (a JobConfig dict with the trial's values
    applied), ``objective`` (``metric``, ``mode``, ``scope``) and ``data_ref`` (a one-item list
    with the object-store reference of the tokenized tables built once per sweep).
    ``entered``: when the worker function started, before it imported this module.
    """
    started = time.time()
    job = JobConfig.model_validate(config["job"])
    objective = config["objective"]
    ctx = ray.train.get_context()
    torch.set_num_threads(max(1, int(job.resources.cpus_per_worker)))
    tables = ray.get(config["data_ref"][0])

    deepspeed = config.get("deepspeed")
    if deepspeed is not None:
        run_prepare_deepspeed(use_gpu=job.resources.use_gpu)
    else:
        run_skip_unused_deepspeed_import()
    if deepspeed is None and ctx.get_world_size() == 1:
        # A lone worker without DeepSpeed is started without a process group (tune/trial.py),
        # so accelerate trains it as plain Trainer.train() does, with no DDP wrapper
        # all-reducing every gradient with itself.
        assert not (torch.distributed.is_available() and torch.distributed.is_initialized()), \
            "a one-worker trial without DeepSpeed must not have a process group"
    output_dir = build_scratch_dir(ctx.get_experiment_name())
    run_clear_stale_scratch(ctx.get_experiment_name(), local_rank=ctx.get_local_rank())
    reporter = RayScopeReportCallback(
        metric=objective["metric"], mode=objective["mode"], scope=objective["scope"],
        local_rank=ctx.get_local_rank(),
    )
    trainer = build_trainer(job, train_table=tables[TRAIN], eval_table=tables[EVAL], output_dir=output_dir,
                            callbacks=[reporter], deepspeed=deepspeed, report_to=config.get("report_to"))
    # The run is named train-<trial id>: its lines in the job log say which trial they are.
    run_replace_printer(trainer, ProgressLineCallback(trial=ctx.get_experiment_name(), metric=objective["metric"]))
    tracking = config.get("tracking")
    if tracking and ctx.get_world_rank() == 0:
        trainer.add_callback(MlflowTrialCallback(runs=RemoteTrialRuns(tracking["actor"]), run_ref=tracking["run_ref"],
                                                 searched=tracking["searched"]))
    step_time = StepTimeCallback()
    trainer.add_callback(step_time)
    trainer = prepare_trainer(trainer)

    built = time.time()
    output = train_or_resume(trainer)
    trained = time.time()
    result = build_result_record(trainer, output, world_size=ctx.get_world_size())
    result["checkpoint_bytes"] = reporter.checkpoint_bytes
    result["report_s"] = round(reporter.report_seconds, 3)
    result["checkpoint_persist"] = reporter.persister.counts.to_dict()
    result["step_time"] = step_time.to_dict()
    # Linux reports the peak resident set in KiB; each trial's workers are fresh processes.
    result["peak_memory_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if deepspeed is not None:
        result["deepspeed"] = build_deepspeed_record(trainer)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # The node's ranks share output_dir, and a rank may still be reading it (loading the
        # best checkpoint, where ZeRO reads every rank's shard) when local rank 0 gets here.
        torch.distributed.barrier()
    if ctx.get_local_rank() == 0:
        try:
            run_remove_scratch([ctx.get_experiment_name()])
        except OSError:
            # The sweep driver removes every trial's scratch again when the trial ends.
            logger.warning("Scratch folder of %s not removed", ctx.get_experiment_name(), exc_info=True)
    # Wall-clock times (seconds since the epoch): the trial driver places them on its own
    # timeline to tell start-up, training and teardown apart (tune/timeline.py).
    result["worker_clock"] = {"entered": entered or started, "started": started, "trainer_built": built,
                              "trained": trained, "returned": time.time()}
    return result


def run_clear_stale_scratch(run_name: str, *, local_rank: int) -> None:
    """Remove what an earlier worker of this run left on this node, before any rank writes.

    A worker group that Ray restarts after a failure, or a trial resumed with ``--resume``,
    continues from the checkpoint in storage; the killed workers' full checkpoints here would
    only fill the disk (and the Trainer's ``save_total_limit`` rotation would count them).
    """
    if local_rank == 0:
        try:
            removed = run_remove_scratch([run_name])
        except OSError:
            logger.warning("Stale scratch folder of %s not removed", run_name, exc_info=True)
        else:
            if removed:
                logger.info("Removed the stale scratch folder %s", removed[0])
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def train_or_resume(trainer: Trainer) -> TrainOutput:
    """Train, resuming from the checkpoint Ray hands this worker when the trial is restored."""
    checkpoint = ray.train.get_checkpoint()
    if not checkpoint:
        return trainer.train()
    with checkpoint.as_directory() as resume_dir:
        logger.info("Resuming from %s", resume_dir)
        return trainer.train(resume_from_checkpoint=resume_dir)


def build_result_record(trainer: Trainer, output: TrainOutput, *, world_size: int) -> dict[str, Any]:
    """What the worker returns to the trial driver about its training run."""
    return {
        "global_step": output.global_step,
        "train_loss": output.training_loss,
        "train_runtime": output.metrics.get("train_runtime"),
        "train_samples_per_second": output.metrics.get("train_samples_per_second"),
        "best_metric": trainer.state.best_metric,
        "best_model_checkpoint": os.path.basename(trainer.state.best_model_checkpoint or ""),
        "node_id": ray.get_runtime_context().get_node_id(),
        "world_size": world_size,
        "tracking_errors": read_tracking_errors(trainer),
        **build_parameter_record(trainer.model),
    }


def build_parameter_record(model: Any) -> dict[str, Any]:
    """What trains: ``trainable_parameters``, ``total_parameters`` and their ratio (a peft
    adapter's is a fraction of a percent)."""
    trainable, total = count_parameters(model)
    return {"trainable_parameters": trainable, "total_parameters": total,
            "trainable_fraction": round(trainable / total, 6) if total else None}
