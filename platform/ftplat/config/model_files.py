"""What a local model folder must hold, checked from its files alone: the pre-flight refuses a
folder that cannot give both the model and its tokenizer without importing transformers (about
2 s of the sweep's start, before any cluster work)."""

from __future__ import annotations

import json
from pathlib import Path

from ftplat.config.schema import ModelConfig, looks_like_local_path
from ftplat.errors import UserError

#: Files ``save_pretrained`` writes for a tokenizer; a model folder needs at least one. Without
#: any, transformers builds a tokenizer from config.json alone whose vocabulary is empty, and
#: every text becomes unknown tokens (a sweep then trains to chance).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model")


def has_tokenizer_files(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


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
    if cfg.config_overrides:
        check_config_overrides(cfg, folder)


def check_config_overrides(cfg: ModelConfig, folder: Path) -> None:
    """``model.config_overrides`` names fields of the model's config: an unknown name would
    reach the model's constructor in every trial's workers and fail there."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=cfg.trust_remote_code)
    unknown = sorted(name for name in cfg.config_overrides if not hasattr(config, name))
    if unknown:
        known = sorted(k for k in config.to_dict() if not k.startswith("_"))
        raise UserError(f"model.config_overrides {unknown} are not fields of {type(config).__name__} "
                        f"(model.name_or_path {cfg.name_or_path!r}); its fields: {', '.join(known[:40])}")


def build_dtype_warnings(cfg: ModelConfig) -> list[str]:
    """A warning when every weight would train in half precision: ``model.dtype: bfloat16``
    without ``model.peft``, or ``auto`` on a local half-precision checkpoint (a hub one is not
    read here). AdamW on bfloat16 weights rounds most small updates away."""
    dtype = cfg.dtype
    if cfg.dtype == "auto" and looks_like_local_path(cfg.name_or_path):
        try:
            saved = json.loads((Path(cfg.name_or_path).expanduser() / "config.json").read_text())
        except (OSError, ValueError):
            saved = {}
        dtype = str(saved.get("dtype") or saved.get("torch_dtype") or "auto") if isinstance(saved, dict) else "auto"
    if cfg.peft is not None or dtype not in ("bfloat16", "float16"):
        return []
    return [f"model.dtype {cfg.dtype}: the whole model and its optimizer state train in {dtype}, where most small "
            "updates round away (why float32 is the default); use it with model.peft (the adapter and head train in "
            "float32 on the half-precision base), or set model.dtype: float32"]
