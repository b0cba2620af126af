"""The Hugging Face Trainer inside one Ray Train worker (``train_fn_per_worker`` calls ``run_worker``)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any

import ray
import ray.train
import torch
from ray.train.huggingface.transformers import prepare_trainer
from transformers import DataCollatorWithPadding, Trainer, set_seed

from ftplat.config.schema import JobConfig
from ftplat.data.preparation import EVAL, TRAIN, build_torch_dataset
from ftplat.train.arguments import build_training_arguments
from ftplat.train.modeling import build_model, build_tokenizer, compute_classification_metrics
from ftplat.tracking.callback import MlflowTrialCallback
from ftplat.train.reporting import RayScopeReportCallback
from ftplat.zero.runtime import build_deepspeed_record, run_prepare_deepspeed

logger = logging.getLogger(__name__)


def build_scratch_dir(run_name: str) -> str:
    """Node-local HF output_dir, shared by the ranks of one node (like torchrun)."""
    return os.path.join(tempfile.gettempdir(), "ftplat-scratch", run_name)


def run_worker(config: dict[str, Any]) -> dict[str, Any]:
    """Train one trial's model on this worker.

    ``config`` holds plain data only: ``job`` (a JobConfig dict with the trial's values
    applied), ``objective`` (``metric``, ``mode``, ``scope``) and ``data_ref`` (a one-item list
    with the object-store reference of the tokenized tables built once per sweep).
    """
    job = JobConfig.model_validate(config["job"])
    objective = config["objective"]
    ctx = ray.train.get_context()
    torch.set_num_threads(max(1, int(job.resources.cpus_per_worker)))

    tables = ray.get(config["data_ref"][0])
    train_ds, eval_ds = build_torch_dataset(tables[TRAIN]), build_torch_dataset(tables[EVAL])

    deepspeed = config.get("deepspeed")
    if deepspeed is not None:
        run_prepare_deepspeed(use_gpu=job.resources.use_gpu)
    elif ctx.get_world_size() == 1:
        # Ray sets LOCAL_RANK even for one worker, which makes accelerate wrap the model in
        # DDP and all-reduce every gradient with itself (about 10% of a CPU step here).
        # DeepSpeed needs the distributed setup even alone, so it keeps LOCAL_RANK.
        os.environ.pop("LOCAL_RANK", None)
    output_dir = build_scratch_dir(ctx.get_experiment_name())
    # The arguments come before the model: under ZeRO-3 they register the DeepSpeed config
    # that makes from_pretrained partition the weights across workers as it loads them
    # (deepspeed.zero.Init); a model loaded first is whole on every worker. HF holds that
    # registration by weak reference, so ``args`` must stay referenced (it does, to the end).
    args = build_training_arguments(job, output_dir=output_dir, report_to=config.get("report_to"),
                                    deepspeed=deepspeed)
    tokenizer = build_tokenizer(job.model)
    # Trainer seeds only in its __init__, after the model exists: without this the new
    # classifier head differs between two trials with the same values (and between reruns).
    set_seed(job.training.seed)
    model = build_model(job.model)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_classification_metrics,
        callbacks=[
            RayScopeReportCallback(
                metric=objective["metric"],
                mode=objective["mode"],
                scope=objective["scope"],
                local_rank=ctx.get_local_rank(),
            )
        ],
    )
    if config.get("tracking") and ctx.get_world_rank() == 0:
        trainer.add_callback(MlflowTrialCallback(**config["tracking"]))
    trainer = prepare_trainer(trainer)

    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as resume_dir:
            logger.info("Resuming from %s", resume_dir)
            output = trainer.train(resume_from_checkpoint=resume_dir)
    else:
        output = trainer.train()

    result = {
        "global_step": output.global_step,
        "train_loss": output.training_loss,
        "train_runtime": output.metrics.get("train_runtime"),
        "train_samples_per_second": output.metrics.get("train_samples_per_second"),
        "best_metric": trainer.state.best_metric,
        "best_model_checkpoint": os.path.basename(trainer.state.best_model_checkpoint or ""),
        "node_id": ray.get_runtime_context().get_node_id(),
        "world_size": ctx.get_world_size(),
    }
    if deepspeed is not None:
        result["deepspeed"] = build_deepspeed_record(trainer)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # The node's ranks share output_dir, and a rank may still be reading it (loading the
        # best checkpoint, where ZeRO reads every rank's shard) when local rank 0 gets here.
        torch.distributed.barrier()
    if ctx.get_local_rank() == 0:
        shutil.rmtree(output_dir, ignore_errors=True)
    return result
