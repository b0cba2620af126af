"""Loading the model's tokenizer: data preparation tokenizes with it once per sweep, and each
worker hands it to its Trainer (for padding and for saving it with every checkpoint)."""

from __future__ import annotations

import socket
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from ftplat.config.model_files import TOKENIZER_FILES, has_tokenizer_files
from ftplat.config.schema import DataConfig, ModelConfig, looks_like_local_path
from ftplat.errors import UserError


def build_tokenizer(cfg: ModelConfig) -> PreTrainedTokenizerBase:
    folder = Path(cfg.name_or_path).expanduser()
    if cfg.name_or_path.startswith(("/", "./", "../", "~")) and not folder.exists():
        # The sweep driver checked the folder on its own node; a trial's workers may be on
        # another, where transformers would read the path as a malformed hub id.
        raise UserError(
            f"model.name_or_path {cfg.name_or_path!r} does not exist on node {socket.gethostname()} (trials run on "
            "any node of the cluster); give a folder at that path on every node (a shared mount, or a copy in "
            "the image), or a hub id"
        )
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


#: ``model_max_length`` of a tokenizer that states no limit (transformers' VERY_LARGE_INTEGER).
UNSTATED_LIMIT = 10**12
#: Model types whose position ids start after the padding index (RoBERTa's
#: ``create_position_ids_from_input_ids``): 514 position rows read 512 tokens.
PADDING_OFFSET_TYPES = frozenset({"camembert", "data2vec-text", "esm", "ibert", "longformer", "luke", "mpnet",
                                  "roberta", "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl", "xmod"})


#: Model types with relative positions only: no learned table to run out of (T5's configs may
#: still carry an n_positions).
RELATIVE_POSITION_TYPES = frozenset({"t5", "mt5", "umt5", "longt5", "switch_transformers"})


def read_learned_position_limit(config) -> tuple[int, str] | None:
    """Tokens a model's learned absolute positions can number, and the config field that says
    so; None for a model without them (rotary like Llama, relative like DeBERTa's and T5's).
    MPNet has relative buckets beside a learned table, and a BERT config's
    ``position_embedding_type`` no longer removes its table (transformers 5): both are limited."""
    if any(getattr(config, a, None) is not None for a in ("rope_theta", "rope_scaling", "rope_parameters")):
        return None
    if getattr(config, "model_type", None) in RELATIVE_POSITION_TYPES:
        return None
    if getattr(config, "position_biased_input", True) is False:  # DeBERTa: relative positions only
        return None
    for attr in ("max_position_embeddings", "n_positions"):
        rows = getattr(config, attr, None)
        if isinstance(rows, int):
            if getattr(config, "model_type", None) in PADDING_OFFSET_TYPES:
                offset = (getattr(config, "pad_token_id", None) or 0) + 1
                return rows - offset, f"its config's {attr} less the padding offset"
            return rows, f"its config's {attr}"
    return None


def check_max_length_fits(data: DataConfig, model: ModelConfig, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a ``data.max_length`` longer than the model reads: masked-lm blocks, packed
    causal-lm blocks and long texts are exactly that long, and a model with learned absolute
    positions fails on them in every trial (``The size of tensor a (1024) must match...``).

    The limit is the tokenizer's ``model_max_length`` when it states one, else the config's
    learned absolute positions (``read_learned_position_limit``); a model without them (rotary
    like Llama, relative like DeBERTa) is left to the user.
    """
    limit, where = None, ""
    if 0 < (tokenizer.model_max_length or 0) < UNSTATED_LIMIT:
        limit, where = int(tokenizer.model_max_length), "its tokenizer's model_max_length"
    else:
        try:
            config = AutoConfig.from_pretrained(model.name_or_path, trust_remote_code=model.trust_remote_code)
        except (OSError, ValueError):  # the weights' loading names what is wrong with the model
            return
        limit, where = read_learned_position_limit(config) or (None, "")
    if limit is not None and data.max_length > limit:
        raise UserError(f"data.max_length is {data.max_length}, but model.name_or_path {model.name_or_path!r} reads "
                        f"at most {limit} tokens ({where}); set data.max_length to {limit} or less")
