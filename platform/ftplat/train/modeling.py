"""Building a trial's model through its task, and checking a local model folder first."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from transformers import PreTrainedModel

from ftplat.adapters import run_wrap_peft
from ftplat.config.schema import JobConfig, ModelConfig, looks_like_local_path
from ftplat.data.tokenizer import TOKENIZER_FILES, has_tokenizer_files
from ftplat.errors import UserError
from ftplat.tasks import build_task

logger = logging.getLogger(__name__)

#: Weight files ``from_pretrained`` reads, a single file or a sharded index (transformers 5
#: reads no TensorFlow or Flax weights).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def build_missing_shards(folder: Path) -> list[str]:
    """Shards a sharded index names that are not in ``folder`` (a half-copied model)."""
    missing = []
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            try:
                shards = set(json.loads((folder / index).read_text()).get("weight_map", {}).values())
            except (ValueError, AttributeError):
                return [f"{index} (not a valid index)"]
            missing += sorted(s for s in shards if not (folder / s).is_file())
    return missing


def check_model_dir(cfg: ModelConfig) -> None:
    """Refuse a local ``model.name_or_path`` that cannot give both the model and its tokenizer,
    before any cluster work: otherwise the tokenizer may load and every trial then fail in its
    workers (no weights), or train on unknown tokens (no tokenizer). Hub ids are not checked."""
    if not looks_like_local_path(cfg.name_or_path):
        return
    where = f"model.name_or_path {cfg.name_or_path!r}"
    folder = Path(cfg.name_or_path).expanduser()
    if not folder.exists():
        raise UserError(f"{where} does not exist; give a model directory or a hub id")
    if not folder.is_dir():
        raise UserError(f"{where} is a file; give the model directory that holds config.json, the weights "
                        "and the tokenizer files")
    if not any(folder.iterdir()):
        raise UserError(f"{where} is an empty directory; save the model and its tokenizer there "
                        "(save_pretrained), or give a hub id")
    missing = []
    if not (folder / "config.json").is_file():
        missing.append("config.json")
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        missing.append(f"weights (one of {', '.join(WEIGHT_FILES)})")
    missing += [f"shard {name}" for name in build_missing_shards(folder)]
    if not has_tokenizer_files(folder):
        missing.append(f"tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    if missing:
        raise UserError(f"{where} is missing {'; '.join(missing)}; save the model and its tokenizer there "
                        "(model.save_pretrained and tokenizer.save_pretrained)")


def build_model(job: JobConfig) -> PreTrainedModel:
    """The pretrained model with the head of the job's task, with its trainable parameters
    set: a peft adapter (``model.peft``), or the parameters ``model.trainable_patterns`` name."""
    task = build_task(job)
    model = task.build_model(job.model)
    if job.model.peft is not None:
        return run_wrap_peft(model, job.model.peft, task_type=task.peft_task_type)
    if job.model.trainable_patterns:
        apply_trainable_patterns(model, job.model.trainable_patterns)
    return model


def count_parameter(param) -> int:
    """Elements of a parameter; ZeRO-3 leaves an empty placeholder and keeps the true size in ``ds_numel``."""
    return getattr(param, "ds_numel", param.numel())


def apply_trainable_patterns(model: PreTrainedModel, patterns: list[str]) -> int:
    """Freeze every parameter whose name matches none of ``patterns``; return the trainable count."""
    compiled = [re.compile(p) for p in patterns]
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = any(p.search(name) for p in compiled)
        trainable += count_parameter(param) if param.requires_grad else 0
    if trainable == 0:
        raise UserError(
            f"model.trainable_patterns {patterns} match no parameter of {type(model).__name__}; "
            f"names look like {[n for n, _ in list(model.named_parameters())[:3]]}"
        )
    total = sum(count_parameter(p) for p in model.parameters())
    logger.info("Trainable parameters: %d of %d (%.2f%%)", trainable, total, 100 * trainable / total)
    return trainable
