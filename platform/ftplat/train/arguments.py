"""The one place that turns ftplat's training config into Hugging Face ``TrainingArguments``."""

from __future__ import annotations

from typing import Any

from transformers import TrainingArguments

from ftplat.config.schema import JobConfig


def build_training_arguments(
    job: JobConfig, *, output_dir: str, report_to: list[str] | None = None, deepspeed: Any = None
) -> TrainingArguments:
    """Build the ``TrainingArguments`` of one trial.

    Args:
        job: the trial's job config (search-space values already applied).
        output_dir: node-local scratch folder; Ray storage holds the durable checkpoints.
        report_to: HF integrations to enable; ``[]`` by default (ftplat reports itself).
        deepspeed: a DeepSpeed config dict or path, when the job uses ZeRO.
    """
    t = job.training
    hf_args = dict(job.training.hf_args)
    # Workers of a multi-worker trial train under DDP; frozen parameters never reach the
    # reducer, so by default the unused-parameter search would only cost time. A model whose
    # forward skips trainable parameters (Longformer's global attention without global tokens)
    # needs hf_args.ddp_find_unused_parameters: true.
    find_unused = hf_args.pop("ddp_find_unused_parameters", False)
    return TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=t.num_train_epochs,
        max_steps=t.max_steps,
        per_device_train_batch_size=t.per_device_train_batch_size,
        per_device_eval_batch_size=t.per_device_eval_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        learning_rate=t.learning_rate,
        weight_decay=t.weight_decay,
        warmup_steps=t.warmup_steps,
        lr_scheduler_type=t.lr_scheduler_type,
        optim=t.optim,
        max_grad_norm=t.max_grad_norm,
        eval_strategy=t.eval_strategy,
        eval_steps=t.eval_steps,
        save_strategy=t.save_strategy,
        save_steps=t.save_steps or t.eval_steps or 500,
        logging_strategy=t.logging_strategy,
        logging_steps=t.logging_steps,
        save_total_limit=t.save_total_limit,
        load_best_model_at_end=t.load_best_model_at_end,
        metric_for_best_model=t.metric_for_best_model,
        greater_is_better=t.resolved_greater_is_better,
        fp16=t.fp16,
        bf16=t.bf16,
        seed=t.seed,
        data_seed=t.seed,
        dataloader_num_workers=t.dataloader_num_workers,
        use_cpu=not job.resources.use_gpu,
        report_to=report_to or [],
        disable_tqdm=True,
        ddp_find_unused_parameters=find_unused,
        deepspeed=deepspeed,
        # Checked against TrainingArguments and the fields above when the config was read.
        **hf_args,
    )
