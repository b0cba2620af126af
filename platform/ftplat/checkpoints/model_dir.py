"""A checkpoint as a model folder that ``from_pretrained`` loads: what export, the test score
and the registered MLflow model are made from.

A full fine-tuning checkpoint holds whole weights (or ZeRO shards, consolidated). A peft
checkpoint (``model.peft``) holds only the adapter and the trained head: the base model it
was trained on is loaded again, with the task's head, and the adapter merged into it; or,
for an adapter-only export, the adapter is kept as it is beside the config of the head.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tempfile
from typing import Any

import pyarrow.fs as pafs

from ftplat.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, build_merged_model, is_adapter_dir
from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.storage import resolve_storage
from ftplat.tasks import build_task
from ftplat.zero.consolidate import has_whole_weights, is_zero_checkpoint, run_consolidate_zero_checkpoint

#: Files of a HF checkpoint that make up the model (not optimizer, scheduler or RNG state).
# transformers 5 saves a tokenizer's chat template in chat_template.jinja.
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".txt", ".model", ".jinja")
EXCLUDED_FILES = {"trainer_state.json"}


def run_copy_model_files(checkpoint_uri: str, dest: str, *, whole: bool = True) -> list[str]:
    """Copy the model, config and tokenizer files of a checkpoint (any storage) to ``dest``;
    a ZeRO checkpoint without whole weights gets them consolidated from its shards.
    ``whole=False`` copies the files as they are (a peft adapter has no config.json)."""
    fs, path = resolve_storage(checkpoint_uri)
    os.makedirs(dest, exist_ok=True)
    copied = []
    for info in fs.get_file_info(pafs.FileSelector(path)):
        name = posixpath.basename(info.path)
        if info.type == pafs.FileType.File and name.endswith(MODEL_FILE_SUFFIXES) and name not in EXCLUDED_FILES:
            with fs.open_input_stream(info.path) as src, open(os.path.join(dest, name), "wb") as out:
                out.write(src.read())
            copied.append(name)
    if not whole:
        return copied
    if "config.json" not in copied:
        raise UserError(f"{checkpoint_uri} holds no config.json: not a Hugging Face checkpoint")
    if not has_whole_weights(copied):
        if not is_zero_checkpoint(checkpoint_uri):
            raise UserError(f"{checkpoint_uri} holds neither model weights nor a DeepSpeed ZeRO checkpoint")
        # ZeRO-3 without stage3_gather_16bit_weights_on_model_save: only per-rank shards.
        copied += run_consolidate_zero_checkpoint(checkpoint_uri, dest)
    return copied


def read_checkpoint_names(checkpoint_uri: str) -> list[str]:
    fs, path = resolve_storage(checkpoint_uri)
    return [os.path.basename(i.path) for i in fs.get_file_info(pafs.FileSelector(path))
            if i.type == pafs.FileType.File]


def is_adapter_checkpoint(checkpoint_uri: str) -> bool:
    return is_adapter_dir(read_checkpoint_names(checkpoint_uri))


def build_base_model(job: JobConfig, checkpoint_dir: str) -> Any:
    """The pretrained base model with the task's head, as the trial's workers built it (with
    the padding id of the tokenizer the checkpoint holds, when the base config has none)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    except (OSError, ValueError):  # a checkpoint saved without its tokenizer: the base config's id stands
        tokenizer = None
    try:
        return build_task(job).build_model(job.model, tokenizer)
    except OSError as exc:
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise UserError(f"the adapter's base model {job.model.name_or_path!r} (model.name_or_path) could not be "
                        f"loaded ({first}); it must be reachable here to merge the adapter") from None


def run_write_model_dir(checkpoint_uri: str, dest: str, job: dict[str, Any] | None, *,
                        adapter_only: bool = False) -> dict[str, Any]:
    """Write the model of a checkpoint into ``dest``; ``job`` is the sweep's job config (a
    dict; needed for adapters: their base model and head). Returns what was written:
    ``{"weights": "full" | "merged" | "adapter", ...}``."""
    if not is_adapter_checkpoint(checkpoint_uri):
        if adapter_only:
            raise UserError(f"--adapter-only: {checkpoint_uri} holds whole model weights, not a peft adapter "
                            "(the sweep did not use model.peft); export it without --adapter-only")
        run_copy_model_files(checkpoint_uri, dest)
        return {"weights": "full"}
    if not job:
        raise UserError(f"{checkpoint_uri} holds a peft adapter, and its sweep has no sweep_config.json naming the "
                        "base model it was trained on")
    cfg = JobConfig.model_validate(job)
    record = {"base_model": cfg.model.name_or_path,
              "peft": cfg.model.peft.model_dump() if cfg.model.peft else None}
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ftplat-adapter-") as tmp:
        names = run_copy_model_files(checkpoint_uri, tmp, whole=False)
        adapter_files = {ADAPTER_CONFIG, *ADAPTER_WEIGHTS}
        base = build_base_model(cfg, tmp)
        with open(os.path.join(tmp, ADAPTER_CONFIG)) as f:
            # What trained whole beside the adapter (a classifier's new head; an LM's head stays
            # frozen); peft lists every head name a task may use, the model has some.
            listed = json.load(f).get("modules_to_save") or []
        present = {name.rsplit(".", 1)[-1] for name, _ in base.named_modules()}
        record["modules_to_save"] = sorted(m for m in listed if m.rsplit(".", 1)[-1] in present)
        if adapter_only:
            keep = names
            # The head's config (labels, problem type) beside the adapter: serving loads the
            # base with it, then the adapter and the trained head.
            base.config.save_pretrained(dest)
            record["weights"] = "adapter"
        else:
            keep = [n for n in names if n not in adapter_files]
            build_merged_model(base, tmp).save_pretrained(dest)
            record["weights"] = "merged"
        for name in keep:
            shutil.copyfile(os.path.join(tmp, name), os.path.join(dest, name))
    return record
