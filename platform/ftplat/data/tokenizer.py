"""Loading the model's tokenizer: data preparation tokenizes with it once per sweep, and each
worker hands it to its Trainer (for padding and for saving it with every checkpoint)."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from ftplat.config.model_files import TOKENIZER_FILES, has_tokenizer_files
from ftplat.config.schema import ModelConfig, looks_like_local_path
from ftplat.errors import UserError


def build_tokenizer(cfg: ModelConfig) -> PreTrainedTokenizerBase:
    folder = Path(cfg.name_or_path).expanduser()
    if looks_like_local_path(cfg.name_or_path) and folder.is_dir() and not has_tokenizer_files(folder):
        raise UserError(
            f"model.name_or_path {cfg.name_or_path!r} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); "
            "save the tokenizer into the model folder too (tokenizer.save_pretrained)"
        )
    try:
        return AutoTokenizer.from_pretrained(cfg.name_or_path, trust_remote_code=cfg.trust_remote_code)
    except (OSError, ValueError) as exc:
        # Hub ids fail the same way when the hub is unreachable; say what to do about both.
        # transformers raises ValueError for what it finds at the path (an unknown model type,
        # a tokenizer it cannot build), so here that is the input's fault too.
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise UserError(
            f"model.name_or_path {cfg.name_or_path!r}: the tokenizer could not be loaded ({first}); "
            "give a local model directory or a reachable hub id"
        ) from None
