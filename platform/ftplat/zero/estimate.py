"""DeepSpeed's memory estimates for the model states (parameters, gradients, optimizer
states) under ZeRO-2 and ZeRO-3, without allocating the model's weights."""

from __future__ import annotations

import contextlib
import io

from ftplat.errors import UserError


def build_meta_model(name_or_path: str, *, task_type: str = "text-classification", trust_remote_code: bool = False):
    """The model ftplat would train for ``task_type`` (the task's ``AutoModelFor...`` class,
    so a causal LM's untied output layer counts), built on the meta device: only its parameter
    shapes matter, so a 70B model costs no memory here."""
    import torch
    import transformers
    from transformers import AutoConfig

    from ftplat.tasks import TASKS

    try:
        config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise UserError(f"--model {name_or_path!r} could not be loaded ({str(exc).splitlines()[0]}); "
                         "give a local model directory or a reachable hub id") from None
    with torch.device("meta"):
        auto = getattr(transformers, TASKS[task_type].auto_model)
        try:
            return auto.from_config(config, trust_remote_code=trust_remote_code)
        except ValueError as exc:  # e.g. a T5 config has no sequence-classification class
            raise UserError(f"--model {name_or_path!r} has no {TASKS[task_type].auto_model} model for --task "
                            f"{task_type} ({str(exc).splitlines()[0]})") from None


def build_parameter_counts(model) -> tuple[int, int]:
    """Total parameters (tied ones once) and the largest single module's own parameters.

    This is DeepSpeed's ``model_to_params`` except that tied parameters are recognised by
    identity: it uses ``data_ptr()``, which is 0 for every meta tensor, so on a meta model
    its ``*_all_live`` estimators would count one parameter tensor and print 0M.
    """
    total = sum({id(p): p.numel() for p in model.parameters()}.values())
    largest = max((sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()), default=0)
    return total, largest


def build_estimate_report(model, *, num_gpus: int, num_nodes: int) -> str:
    """The ZeRO-2 and ZeRO-3 tables DeepSpeed prints, captured as one text."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold

    total, largest = build_parameter_counts(model)
    out = io.StringIO()
    # DeepSpeed rounds the counts down to millions, which hides a small model; say them exactly.
    print(f"Model: {type(model).__name__}, {total:,} parameters, largest layer {largest:,}; "
          f"{num_nodes} node(s) x {num_gpus} GPU(s)\n", file=out)
    with contextlib.redirect_stdout(out):
        print("== ZeRO-2 ==")
        estimate_zero2_model_states_mem_needs_all_cold(total, num_gpus_per_node=num_gpus, num_nodes=num_nodes)
        print("\n== ZeRO-3 ==")
        estimate_zero3_model_states_mem_needs_all_cold(total, largest, num_gpus_per_node=num_gpus,
                                                       num_nodes=num_nodes)
    return out.getvalue()
