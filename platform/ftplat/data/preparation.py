"""Turning raw splits into tokenized Arrow tables, once per sweep.

The sweep driver runs :func:`build_tokenized_tables` a single time; the tables go into the Ray
object store and every worker of every trial reads them from there (zero-copy on the same
node), so no trial re-reads or re-tokenizes the data.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa

from ftplat.config.schema import DataConfig, ModelConfig
from ftplat.data.sources import load_raw_splits
from ftplat.data.tokenizer import build_tokenizer
from ftplat.errors import UserError

logger = logging.getLogger(__name__)

TRAIN, EVAL = "train", "eval"


@dataclass(frozen=True)
class TokenizedData:
    """The tokenized splits and what was read to make them.

    ``train`` and ``eval`` hold ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when
    the tokenizer makes them) and ``labels``. ``stats`` has one entry per role (``split``,
    ``rows``, ``label_counts``) and ``seconds``, the time taken to load and tokenize.
    """

    train: pa.Table
    eval: pa.Table
    stats: dict[str, Any]

    def tables(self) -> dict[str, pa.Table]:
        """The tables by role, the plain dict that goes into Ray's object store (workers read
        it without importing this class)."""
        return {TRAIN: self.train, EVAL: self.eval}


def build_stratified_indices(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Indices of a ``size``-row sample keeping the label proportions (largest remainder)."""
    if size >= len(labels):
        return np.random.default_rng(seed).permutation(len(labels))
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts / counts.sum() * size
    quota = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - quota), kind="stable")[: size - quota.sum()]:
        quota[i] += 1
    picked = [rng.choice(np.flatnonzero(labels == c), q, replace=False) for c, q in zip(classes, quota)]
    return rng.permutation(np.concatenate(picked))


def build_class_label_ids(values: np.ndarray, feature: Any, data: DataConfig, model: ModelConfig,
                          split: str) -> np.ndarray:
    """Ids of a ``datasets.ClassLabel`` column in ``model.id2label``'s order.

    A ClassLabel id means its name (``names=["pos", "neg"]``: 0 is "pos"); taking it as an id
    of ``model.id2label`` would train and export a model whose labels are swapped.
    """
    names = getattr(feature, "names", None) if isinstance(feature, datasets.ClassLabel) else None
    if not names or model.id2label is None or names == [model.id2label[i] for i in sorted(model.id2label)]:
        return values
    label2id = {v: k for k, v in model.id2label.items()}
    if sorted(names) != sorted(label2id) or len(set(names)) != len(names):
        raise UserError(
            f"data.label_column {data.label_column!r} of split {split!r} is a ClassLabel with names {names} "
            f"but model.id2label is {model.id2label}; set model.id2label to "
            f"{dict(enumerate(names))} (the dataset's order)"
        )
    logger.info("data.label_column %r of split %r: ClassLabel names %s mapped to model.id2label %s",
                data.label_column, split, names, model.id2label)
    remap = np.asarray([label2id[name] for name in names], dtype=np.int64)
    known = (values >= 0) & (values < len(names))  # ClassLabel's -1 (no label) stays and is refused
    return np.where(known, remap[np.clip(values, 0, len(names) - 1)], values)


def _encode_labels(ds: datasets.Dataset, data: DataConfig, model: ModelConfig, split: str) -> np.ndarray:
    raw = ds[data.label_column]
    values = np.asarray(raw.to_pylist() if hasattr(raw, "to_pylist") else list(raw))
    if values.dtype.kind in "OUS":
        label2id = {v: k for k, v in (model.id2label or {}).items()}
        unknown = sorted(set(values.tolist()) - set(label2id))
        if unknown:
            raise UserError(
                f"data.label_column {data.label_column!r} of split {split!r} holds labels "
                f"{unknown[:5]} that model.id2label {model.id2label} does not name"
            )
        return np.asarray([label2id[v] for v in values.tolist()], dtype=np.int64)
    if values.dtype.kind not in "iu" and not (values.dtype.kind == "f" and np.all(values == np.round(values))):
        raise UserError(f"data.label_column {data.label_column!r} of split {split!r} is not integer class ids")
    values = build_class_label_ids(values.astype(np.int64), ds.features.get(data.label_column), data, model, split)
    bad = values[(values < 0) | (values >= model.num_labels)]
    if bad.size:
        raise UserError(
            f"data.label_column {data.label_column!r} of split {split!r} has label {int(bad[0])} "
            f"outside 0..{model.num_labels - 1}; set model.num_labels (and model.id2label) to match"
        )
    return values


def build_tokenized_tables(data: DataConfig, model: ModelConfig) -> TokenizedData:
    """Load, subset, check and tokenize the data."""
    start = time.perf_counter()
    raw = load_raw_splits(data)
    tokenizer = build_tokenizer(model)
    sizes = {TRAIN: (data.train_split, data.train_size), EVAL: (data.eval_split, data.eval_size)}
    tables: dict[str, pa.Table] = {}
    stats: dict[str, Any] = {}
    for role, (split, size) in sizes.items():
        ds = raw[split]
        labels = _encode_labels(ds, data, model, split)
        if size is not None:
            idx = build_stratified_indices(labels, size, data.subset_seed)
            ds, labels = ds.select(idx), labels[idx]
        texts = ds[data.text_column]
        texts = texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)
        if any(not isinstance(t, str) for t in texts):
            raise UserError(f"data.text_column {data.text_column!r} of split {split!r} holds non-text values")
        encoded = tokenizer(
            texts,
            truncation=True,
            max_length=data.max_length,
            padding="max_length" if data.pad_to_max_length else False,
        )
        columns = {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded}
        columns["labels"] = labels.tolist()
        tables[role] = pa.table(columns)
        stats[role] = {
            "split": split,
            "rows": len(labels),
            "label_counts": {int(c): int(n) for c, n in zip(*np.unique(labels, return_counts=True))},
        }
    stats["seconds"] = round(time.perf_counter() - start, 2)
    logger.info(
        "Tokenized %d train / %d eval examples in %.1fs",
        stats[TRAIN]["rows"], stats[EVAL]["rows"], stats["seconds"],
    )
    return TokenizedData(train=tables[TRAIN], eval=tables[EVAL], stats=stats)


def build_torch_dataset(table: pa.Table) -> datasets.Dataset:
    """Wrap a tokenized table for the HF Trainer without copying it (the Trainer's
    padding collator turns rows into tensors)."""
    # An explicit fingerprint: otherwise datasets hashes the whole table with dill (slow on
    # real data, and it prints bytecode into the worker logs).
    return datasets.Dataset(table, fingerprint=uuid.uuid4().hex)
