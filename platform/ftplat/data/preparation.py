"""Turning raw splits into tokenized Arrow tables, once per sweep.

The sweep driver runs :func:`build_tokenized_tables` a single time; the tables go into the Ray
object store and every worker of every trial reads them from there (zero-copy on the same
node), so no trial re-reads or re-tokenizes the data.
"""

from __future__ import annotations

import logging
import math
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


def _is_missing(value: Any) -> bool:
    # CSV readers give an empty field as null, or as NaN when the whole column is empty.
    return value is None or (isinstance(value, float) and math.isnan(value))


def select_empty_text_rows(texts: list[Any], data: DataConfig, split: str) -> list[int]:
    """Rows whose text is empty, whitespace-only or missing; ``UserError`` on a value that is
    not text at all (a number: the wrong column)."""
    empty = []
    for row, text in enumerate(texts):
        if isinstance(text, str):
            if not text.strip():
                empty.append(row)
        elif _is_missing(text):
            empty.append(row)
        else:
            raise UserError(
                f"data.text_column {data.text_column!r} of split {split!r} holds non-text values (row {row}: "
                f"{type(text).__name__} {text!r:.40}); point data.text_column at the column of texts"
            )
    return empty


def build_nonempty_split(ds: datasets.Dataset, texts: list[Any], data: DataConfig,
                         split: str) -> tuple[datasets.Dataset, list[str], int]:
    """The split without its empty texts (``data.empty_texts: drop``) and how many went, or
    ``UserError`` naming the count: an empty text still gets a label, and trains the model on
    nothing but the special tokens."""
    empty = select_empty_text_rows(texts, data, split)
    if not empty:
        return ds, texts, 0
    where = f"data.text_column {data.text_column!r} of split {split!r}"
    if len(empty) == len(texts):
        raise UserError(f"{where}: all {len(texts)} texts are empty or missing; check data.text_column and the files")
    if data.empty_texts == "error":
        raise UserError(
            f"{where} has {len(empty)} empty or whitespace-only texts of {len(texts)} (first at row {empty[0]}); "
            "remove them from the data, or set data.empty_texts: drop to leave them out"
        )
    dropped = set(empty)
    keep = [row for row in range(len(texts)) if row not in dropped]
    return ds.select(keep), [texts[row] for row in keep], len(empty)


def check_subset_size(size: int | None, rows: int, *, field: str, split: str, dropped: int) -> None:
    """A subset larger than its split would silently train (or score) on the whole split."""
    if size is not None and size > rows:
        after = f" after dropping {dropped} empty texts" if dropped else ""
        raise UserError(
            f"data.{field} {size} is larger than split {split!r}, which has {rows} rows{after}; "
            f"lower data.{field}, or set it to null to use the whole split"
        )


def build_checked_split(ds: datasets.Dataset, data: DataConfig, model: ModelConfig, split: str,
                        size: int | None, field: str) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """The texts and label ids of one split, checked (texts, labels, subset size) and subset."""
    texts = ds[data.text_column]
    texts = texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)
    ds, texts, dropped = build_nonempty_split(ds, texts, data, split)
    labels = _encode_labels(ds, data, model, split)
    check_subset_size(size, len(labels), field=field, split=split, dropped=dropped)
    if size is not None:
        idx = build_stratified_indices(labels, size, data.subset_seed)
        texts, labels = [texts[i] for i in idx], labels[idx]
    stats = {
        "split": split,
        "rows": len(labels),
        "label_counts": {int(c): int(n) for c, n in zip(*np.unique(labels, return_counts=True))},
    }
    if dropped:
        stats["dropped_empty_texts"] = dropped
    return texts, labels, stats


def build_tokenized_tables(data: DataConfig, model: ModelConfig) -> TokenizedData:
    """Load, check and subset both splits, then tokenize them (every check runs before the
    slow part)."""
    start = time.perf_counter()
    raw = load_raw_splits(data)
    roles = {TRAIN: (data.train_split, data.train_size, "train_size"),
             EVAL: (data.eval_split, data.eval_size, "eval_size")}
    checked = {role: build_checked_split(raw[split], data, model, split, size, field)
               for role, (split, size, field) in roles.items()}
    # Logged once every check has passed: a refused sweep prints its one error line only.
    for role, (_, _, role_stats) in checked.items():
        if role_stats.get("dropped_empty_texts"):
            logger.info("data.empty_texts: drop: left out %d empty or whitespace-only texts of split %r (%s)",
                        role_stats["dropped_empty_texts"], role_stats["split"], role)
    tokenizer = build_tokenizer(model)
    tables: dict[str, pa.Table] = {}
    stats: dict[str, Any] = {}
    for role, (texts, labels, role_stats) in checked.items():
        encoded = tokenizer(
            texts,
            truncation=True,
            max_length=data.max_length,
            padding="max_length" if data.pad_to_max_length else False,
        )
        columns = {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded}
        columns["labels"] = labels.tolist()
        tables[role] = pa.table(columns)
        stats[role] = role_stats
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
