"""How token-classification's tokenizer sees words: as in running text, in training and serving.

Training encodes each word alone (``is_split_into_words``); serving encodes raw text, and a long
text in windows. These keep both the same: a byte-level BPE word with its leading space, and
windows no longer than training's sequences.
"""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger(__name__)

#: The ``tokenizers`` components of a byte-level BPE tokenizer that hold ``add_prefix_space``.
BYTE_LEVEL_TYPES = ("ByteLevel", "RobertaProcessing")


def find_byte_level_parts(component: Any) -> list[Any]:
    """The byte-level parts, alone or in a ``Sequence``, of a ``tokenizers`` pre-tokenizer or
    post-processor (a tokenizer may have none)."""
    if component is None:
        return []
    state = json.loads(component.__getstate__())
    if state.get("type") != "Sequence":
        return [component] if state.get("type") in BYTE_LEVEL_TYPES else []
    parts = state.get("pretokenizers") or state.get("processors") or []
    return [component[i] for i, part in enumerate(parts) if part.get("type") in BYTE_LEVEL_TYPES]


def run_add_prefix_space(tokenizer: Any) -> Any:
    """Set ``add_prefix_space`` on a byte-level BPE tokenizer (RoBERTa, Longformer, GPT-2, BLOOM,
    DeBERTa) in place, as run_ner.py loads them; any other tokenizer is returned as it is.
    SentencePiece ``Metaspace`` tokenizers (Llama, XLM-R, T5) need nothing: they give a word
    encoded alone the same leading ``▁`` it has in running text."""
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a slow tokenizer is refused by tokenize
    words = find_byte_level_parts(backend.pre_tokenizer) if backend is not None else []
    if not words or all(part.add_prefix_space for part in words):
        return tokenizer
    # The post-processor's setting keeps the offsets (entity start/end) off that space.
    for part in words + find_byte_level_parts(backend.post_processor):
        part.add_prefix_space = True
    # tokenizer_config.json's: classes that build their pre-tokenizer from it (RoBERTa) load so.
    tokenizer.add_prefix_space = True
    tokenizer.init_kwargs["add_prefix_space"] = True
    return tokenizer


def build_truncation_counts(words: list[Any], tags: Any, reached: dict[int, int],
                            id2label: dict[int, str] | None) -> dict[str, int]:
    """Of a split's rows (``words`` and their ``tags``), the words data.max_length cut off and
    the entities that lost a word to the cut (not counted without the tag names). ``reached``:
    for each row the tokenizer truncated, how many of its words the encoding still holds (one
    past the last ``word_ids()`` index: a word that makes no token, an empty string or a
    zero-width space, is not cut when a later one is reached)."""
    from seqeval.metrics.sequence_labeling import get_entities

    rows = words_cut = entities_cut = 0
    for i, k in reached.items():
        n = len(words[i])
        if k >= n:
            continue
        rows, words_cut = rows + 1, words_cut + n - k
        if id2label is not None:
            entities_cut += sum(1 for _, _, end in get_entities([id2label[int(t)] for t in tags[i]]) if end >= k)
    counts = {"rows_cut": rows, "words_cut": words_cut}
    return {**counts, "entities_cut": entities_cut} if id2label is not None else counts


def run_truncation_checks(tokenizer: Any, words: list[Any], tags: Any, table: Any, *, role: str, max_length: int,
                          id2label: dict[int, str] | None) -> dict[str, int]:
    """``build_truncation_counts`` of a tokenized split, logged as a warning when some row was
    cut. Only the rows that fill ``max_length`` can have been cut; those are encoded again to
    see which word each reached."""
    import numpy as np
    import pyarrow.compute as pc

    if "attention_mask" in table.column_names:  # padded rows count their real tokens
        mask = table.column("attention_mask").combine_chunks()
        lengths = np.bincount(np.asarray(pc.list_parent_indices(mask)), weights=np.asarray(pc.list_flatten(mask)),
                              minlength=table.num_rows)
    else:
        lengths = np.asarray(pc.list_value_length(table.column("input_ids").combine_chunks()))
    full = [int(i) for i in np.flatnonzero(lengths >= max_length)]
    if not full:
        return {}
    encoded = tokenizer([list(words[i]) for i in full], is_split_into_words=True, truncation=True,
                        max_length=max_length)
    reached = {i: 1 + max((w for w in encoded.word_ids(j) if w is not None), default=-1) for j, i in enumerate(full)}
    counts = build_truncation_counts(words, tags, reached, id2label)
    if not counts["rows_cut"]:
        return {}
    entities = f" and {counts['entities_cut']} entities" if "entities_cut" in counts else ""
    logger.warning("data.max_length %d cuts %d of the %s split's %d rows: %d words%s past it are not %s; raise "
                   "data.max_length", max_length, counts["rows_cut"], role, len(words), counts["words_cut"], entities,
                   "trained" if role == "train" else "scored (precision, recall and F1 leave them out)")
    return counts


def build_window_overlap(max_length: int) -> int:
    """Tokens two consecutive serving windows of ``max_length`` share: a quarter, so a word near
    a window's edge is tagged again with context on both sides; always below the window less
    its special tokens, as the pipeline requires."""
    return max(0, min(max_length // 4, max_length - 4))
