"""The worker side of DeepSpeed: the accelerator choice, a record of what DeepSpeed ran, and
no DeepSpeed import in a trial that does not use it."""

from __future__ import annotations

import os
import sys
from typing import Any


def run_prepare_deepspeed(*, use_gpu: bool) -> None:
    """Pin DeepSpeed's accelerator, then attach DeepSpeed's comm layer to Ray's process group.

    DeepSpeed picks CUDA whenever it can see a GPU, so a CPU trial on a GPU node would
    otherwise put its engine on a device the Trainer does not use; the accelerator is chosen
    when DeepSpeed is first imported, hence before the import. On CPU it talks over the gloo
    group Ray Train already created (oneCCL is not needed).

    ZeRO-3's ``zero.Init`` (run by ``from_pretrained``) parses the config before it sets up
    DeepSpeed's comm layer itself, and until then sees a world of one: the "auto"
    train_batch_size (per-worker batch x workers) then fails DeepSpeed's batch check. The
    Trainer would attach it only after the model is loaded, so it is attached here.
    """
    if not use_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed

    deepspeed.init_distributed()


def run_skip_unused_deepspeed_import() -> None:
    """Keep a trial without DeepSpeed from importing it.

    accelerate's ``extract_model_from_parallel``, which the Trainer's construction and every
    checkpoint save go through, imports DeepSpeed whenever it is installed, only to ask whether
    the model is a ``DeepSpeedEngine``: 0.5-1.1 s of a fresh worker on 2 cores (and a log line
    about DeepSpeed's accelerator), once per trial. No object can be an engine before
    DeepSpeed is imported, so until it is, the answer is no without the import. An accelerate
    without that hook is left as it is (``test_structure`` checks the installed one has it).
    """
    from accelerate.utils import other

    installed = getattr(other, "is_deepspeed_available", None)
    if installed is None or getattr(installed, "imported_only", False):
        return

    def is_deepspeed_imported_and_available() -> bool:
        return "deepspeed" in sys.modules and installed()

    is_deepspeed_imported_and_available.imported_only = True
    other.is_deepspeed_available = is_deepspeed_imported_and_available


def build_deepspeed_record(trainer) -> dict[str, Any]:
    """What the DeepSpeed engine actually trained with, read back from the engine after
    ``train()``: the optimizer DeepSpeed built and its constructor values, and the scheduler's
    peak lr and step counts. The sweep's sampled values must show up here."""
    engine = trainer.model_wrapped
    zero_optimizer = engine.optimizer
    base = getattr(zero_optimizer, "optimizer", zero_optimizer)
    scheduler = engine.lr_scheduler
    record: dict[str, Any] = {
        "zero_stage": int(engine.zero_optimization_stage()),
        "world_size": int(engine.world_size),
        "optimizer": type(base).__name__,
        "optimizer_lr": float(base.defaults["lr"]),
        "optimizer_weight_decay": float(base.defaults.get("weight_decay", 0.0)),
        "scheduler": type(scheduler).__name__ if scheduler is not None else None,
    }
    filled = trainer.accelerator.state.deepspeed_plugin.hf_ds_config
    # The values HF wrote over "auto", to tell a wrong fill from DeepSpeed's own adjustments.
    record["config"] = {key: filled.get_value(key) for key in (
        "optimizer.params.lr", "optimizer.params.weight_decay", "scheduler.params.warmup_num_steps",
        "scheduler.params.total_num_steps", "train_batch_size")}
    if hasattr(scheduler, "max_lrs"):  # DeepSpeed's WarmupLR family (it warms up for at least 2 steps)
        record.update(scheduler_max_lr=float(scheduler.max_lrs[0]), warmup_num_steps=int(scheduler.warmup_num_steps),
                      total_num_steps=getattr(scheduler, "total_num_steps", None))
    elif scheduler is not None and hasattr(scheduler, "base_lrs"):  # the Trainer's schedule, stepped by DeepSpeed
        record.update(scheduler_max_lr=float(scheduler.base_lrs[0]))
    return record
