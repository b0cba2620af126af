"""Loading the model's tokenizer: data preparation tokenizes with it once per sweep, and each
worker hands it to its Trainer (for padding and for saving it with every checkpoint)."""

from __future__ import annotations

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from ftplat.config.schema import ModelConfig
from ftplat.errors import UserError


def build_tokenizer(cfg: ModelConfig) -> PreTrainedTokenizerBase:
    try:
        return AutoTokenizer.from_pretrained(cfg.name_or_path, trust_remote_code=cfg.trust_remote_code)
    except OSError as exc:
        # Hub ids fail the same way when the hub is unreachable; say what to do about both.
        raise UserError(
            f"model.name_or_path {cfg.name_or_path!r} could not be loaded ({str(exc).splitlines()[0]}); "
            "give a local model directory or a reachable hub id"
        ) from None
