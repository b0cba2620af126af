"""Turning raw splits into tokenized Arrow tables, once per sweep.

The sweep driver runs :func:`build_tokenized_tables` a single time; the tables go into the Ray
object store and every worker of every trial reads them from there (zero-copy on the same
node), so no trial re-reads or re-tokenizes the data.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa

from ftplat.config.schema import DataConfig, JobConfig, ModelConfig
from ftplat.data.compact import build_chunked_table, build_compact_table, build_table_fingerprint
from ftplat.data.overlap import run_overlap_checks
from ftplat.data.sources import load_raw_splits
from ftplat.data.tokenizer import build_tokenizer, check_max_length_fits
from ftplat.errors import UserError
from ftplat.tasks import build_task
from ftplat.tasks.base import Examples, Task, is_missing_value

logger = logging.getLogger(__name__)

TRAIN, EVAL, TEST = "train", "eval", "test"


@dataclass(frozen=True)
class TokenizedData:
    """The tokenized splits by role and what was read to make them.

    ``tables`` holds ``train``, ``eval`` (the selection split) and, when the data has a test
    split, ``test``: the task's model inputs and ``labels`` (none for masked-lm, whose
    collator makes them), the plain dict that goes into Ray's object store. ``stats`` has one
    entry per role (``split``, ``rows``, the task's label statistics; ``sequences`` where
    tokenizing made blocks, see ``build_role_stats``), ``selection`` (how the selection split
    was chosen) and ``seconds``.
    """

    tables: dict[str, pa.Table]
    stats: dict[str, Any]

    @property
    def train(self) -> pa.Table:
        return self.tables[TRAIN]

    @property
    def eval(self) -> pa.Table:
        return self.tables[EVAL]


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



#: The config field of each input role a task reads (``Task.build_inputs``).
ROLE_FIELDS = {"text": "text_column", "text_pair": "text_pair_column", "tokens": "tokens_column",
               "prompt": "prompt_column", "completion": "completion_column"}


#: A text with nothing to read: whitespace and the invisible format characters a tokenizer
#: drops (zero-width space and joiners, word joiner, byte-order mark, soft hyphen); such a text
#: trained as [CLS] [SEP]. Matching stops at the first visible character.
BLANK_TEXT = re.compile(r"[\s\u200b-\u200f\u2060-\u2064\ufeff\u00ad]*")


def select_empty_text_rows(texts: list[Any], field: str, column: str, split: str) -> list[int]:
    """Rows whose text (or word list) is empty, whitespace-only or missing; ``UserError`` on
    a value that is neither (a number: the wrong column)."""
    empty = []
    for row, text in enumerate(texts):
        if isinstance(text, str):
            if BLANK_TEXT.fullmatch(text):
                empty.append(row)
        elif isinstance(text, (list, tuple)) and field == "tokens_column":  # a word list
            if not text:
                empty.append(row)
        elif is_missing_value(text):
            empty.append(row)
        else:
            raise UserError(
                f"data.{field} {column!r} of split {split!r} holds non-text values (row {row}: "
                f"{type(text).__name__} {text!r:.40}); point data.{field} at the column of texts"
            )
    return empty


def build_nonempty_split(ds: datasets.Dataset, inputs: dict[str, list[Any]], data: DataConfig,
                         split: str) -> tuple[datasets.Dataset, dict[str, list[Any]], int]:
    """The split without its empty texts (``data.empty_texts: drop``) and how many went, or
    ``UserError`` naming the count: an empty text still gets a label, and trains the model on
    nothing but the special tokens."""
    empty: set[int] = set()
    for role, values in inputs.items():
        field = ROLE_FIELDS[role]
        column = getattr(data, field)
        rows = select_empty_text_rows(values, field, column, split)
        where = f"data.{field} {column!r} of split {split!r}"
        if rows and len(rows) == len(values):
            raise UserError(f"{where}: all {len(values)} texts are empty or missing; check data.{field} and the files")
        if rows and data.empty_texts == "error":
            raise UserError(
                f"{where} has {len(rows)} empty or whitespace-only texts of {len(values)} (first at row {rows[0]}); "
                "remove them from the data, or set data.empty_texts: drop to leave them out"
            )
        empty.update(rows)
    if not empty:
        return ds, inputs, 0
    keep = [row for row in range(len(ds)) if row not in empty]
    return ds.select(keep), {role: [v[row] for row in keep] for role, v in inputs.items()}, len(empty)


def check_subset_size(size: int | None, rows: int, *, field: str, split: str, dropped: int,
                      held_out: int = 0) -> None:
    """A subset larger than its split would silently train (or score) on the whole split."""
    if size is not None and size > rows:
        done = ([f"dropping {dropped} empty texts"] if dropped else []) + (
            [f"holding out {held_out} for validation (data.validation.holdout)"] if held_out else [])
        after = f" after {' and '.join(done)}" if done else ""
        raise UserError(
            f"data.{field} {size} is larger than split {split!r}, which has {rows} rows{after}; "
            f"lower data.{field}, or set it to null to use the whole split"
        )


def build_checked_examples(ds: datasets.Dataset, task: Task, data: DataConfig, model: ModelConfig,
                           split: str) -> Examples:
    """One split's inputs and labels, checked (texts, labels) with its empty texts handled."""
    inputs = task.build_inputs(ds, data, split)
    ds, inputs, dropped = build_nonempty_split(ds, inputs, data, split)
    return Examples(inputs, task.build_labels(ds, data, model, split), dropped)


def check_class_label_features_agree(splits: dict[str, datasets.Dataset], data: DataConfig, model: ModelConfig) -> None:
    """Refuse splits whose label ids mean different classes: a ``ClassLabel`` (alone, or in a
    list of tags) whose names are in another order than ``model.id2label``'s, so its ids are
    mapped by name, beside a split of plain ids, taken as they are (a split written through
    pandas loses the feature). Each split was mapped alone, and the test labels came out
    inverted. Without ``model.id2label`` nothing is mapped."""
    if not model.id2label:
        return
    order = [model.id2label[i] for i in sorted(model.id2label)]

    def class_names(ds: datasets.Dataset) -> list[str] | None:
        feature = ds.features.get(data.label_column)
        if type(feature).__name__ in ("Sequence", "List", "LargeList"):  # tags, or several labels, per row
            feature = getattr(feature, "feature", None)
        return getattr(feature, "names", None) if type(feature).__name__ == "ClassLabel" else None

    names = {split: class_names(ds) for split, ds in splits.items()}
    mapped = [s for s, n in names.items() if n is not None and n != order]
    plain = [s for s, n in names.items() if n is None]
    if mapped and plain:
        raise UserError(f"data.label_column {data.label_column!r} of split {mapped[0]!r} is a ClassLabel with names "
                        f"{names[mapped[0]]} (its ids are mapped by name to model.id2label), but split {plain[0]!r} "
                        "holds plain ids, taken as model.id2label's: the same id means different classes; give "
                        "every split the same label feature, or plain ids in model.id2label's order")


def build_subset_indices(key: np.ndarray | None, rows: int, size: int, seed: int) -> np.ndarray:
    """``size`` row indices, stratified by ``key`` when the task gives one, else at random."""
    if key is None:
        return np.random.default_rng(seed).permutation(rows)[:size]
    return build_stratified_indices(key, size, seed)


@dataclass(frozen=True)
class SplitPlan:
    """Which split plays which role: train, the selection split (``eval``), the test split."""

    train: str
    eval: str | None  # None: held out of train
    test: str | None
    source: str  # how the selection split was chosen, for the summary and the card

    @property
    def required(self) -> list[str]:
        return [self.train] + ([self.eval] if self.eval else [])


def build_split_plan(data: DataConfig, optional_present: set[str] | None = None) -> SplitPlan:
    """The selection split by the validation protocol; ``optional_present`` are the splits
    the data has among ``validation`` and the test split (None: not yet known)."""
    present = optional_present or set()
    test = data.test_split if data.test_split in present else None
    if data.eval_split is not None:
        return SplitPlan(data.train_split, data.eval_split, None if test == data.eval_split else test,
                         "data.eval_split")
    if data.validation.split is not None:
        return SplitPlan(data.train_split, data.validation.split, None if test == data.validation.split else test,
                         "data.validation.split")
    if "validation" in present and data.test_split != "validation" and data.train_split != "validation":
        return SplitPlan(data.train_split, "validation", test, "the data's validation split")
    return SplitPlan(data.train_split, None, test, "held out of the train split")


def build_holdout(train: Examples, task: Task, data: DataConfig) -> tuple[Examples, Examples]:
    """Train without its hold-out, and the hold-out: ``data.validation.holdout`` of the rows
    (a fraction below 1), stratified by the task's key, drawn with its seed."""
    holdout = data.validation.holdout
    size = int(holdout) if holdout >= 1 else max(1, round(holdout * len(train)))
    if size >= len(train) - 1:
        shown = int(holdout) if holdout >= 1 else holdout
        raise UserError(f"data.validation.holdout {shown} leaves {max(0, len(train) - size)} of the {len(train)} rows "
                        f"of split {data.train_split!r} to train on; lower it, or give a validation split "
                        "(data.validation.split)")
    picked = build_subset_indices(task.build_stratify_key(train.labels), len(train), size, data.validation.seed)
    rest = np.setdiff1d(np.arange(len(train)), picked)
    held = train.select(np.sort(picked))
    # The split's dropped empty texts are counted (and logged) once, with train.
    return train.select(rest), Examples(held.inputs, held.labels)


def build_role_stats(examples: Examples, task: Task, split: str, table: pa.Table | None = None) -> dict[str, Any]:
    """``rows``: the examples read (after any subset); ``sequences``: the rows of the tokenized
    table, when the task made another number of them (masked-lm's and packed causal-lm's
    blocks of data.max_length tokens)."""
    stats = {"split": split, "rows": len(examples), **task.build_label_stats(examples.labels)}
    if table is not None and table.num_rows != len(examples):
        stats["sequences"] = table.num_rows
    if examples.dropped:
        stats["dropped_empty_texts"] = examples.dropped
    return stats


def build_tokenized_tables(job: JobConfig) -> TokenizedData:
    """Load and check every split the job's task reads, split off the hold-out, draw the
    subsets, then tokenize (every check runs before the slow part)."""
    start = time.perf_counter()
    data, model, task = job.data, job.model, build_task(job)
    plan = build_split_plan(data)
    optional = (["validation"] if plan.eval is None else []) + ([data.test_split] if data.test_split else [])
    raw = load_raw_splits(data, task.read_columns(data), required=plan.required, optional=optional)
    plan = build_split_plan(data, set(raw))
    used = [plan.train] + [s for s in (plan.eval, plan.test) if s]
    if "label_column" in task.read_columns(data):
        check_class_label_features_agree({s: raw[s] for s in dict.fromkeys(used)}, data, model)
    examples = {split: build_checked_examples(raw[split], task, data, model, split) for split in dict.fromkeys(used)}
    roles: dict[str, tuple[Examples, str]] = {TRAIN: (examples[plan.train], plan.train)}
    if plan.eval is None:
        train, held = build_holdout(examples[plan.train], task, data)
        roles[TRAIN], roles[EVAL] = (train, plan.train), (held, f"{plan.train} (held out)")
    else:
        roles[EVAL] = (examples[plan.eval], plan.eval)
    if plan.test:
        roles[TEST] = (examples[plan.test], plan.test)
    sizes = {TRAIN: ("train_size", data.train_size), EVAL: ("eval_size", data.eval_size),
             TEST: ("test_size", data.test_size)}
    for role, (ex, split) in list(roles.items()):
        field, size = sizes[role]
        check_subset_size(size, len(ex), field=field, split=split, dropped=ex.dropped,
                          held_out=len(roles[EVAL][0]) if role == TRAIN and plan.eval is None else 0)
        if size is not None:
            roles[role] = (ex.select(build_subset_indices(task.build_stratify_key(ex.labels), len(ex), size,
                                                          data.subset_seed)), split)
    # Logged once every check has passed: a refused sweep prints its one error line only.
    for role, (ex, split) in roles.items():
        if ex.dropped:
            logger.info("data.empty_texts: drop: left out %d empty or whitespace-only texts of split %r (%s)",
                        ex.dropped, split, role)
    tokenizer = task.prepare_tokenizer(build_tokenizer(model))
    check_max_length_fits(data, model, tokenizer)
    shared = run_overlap_checks(roles[TRAIN][0].inputs,
                                {role: (ex.inputs, split) for role, (ex, split) in roles.items() if role != TRAIN})
    tables: dict[str, pa.Table] = {}
    stats: dict[str, Any] = {"selection": plan.source}
    for role, (ex, split) in roles.items():
        # A line per table: tokenizing all of IMDB is a minute, without progress bars.
        logger.info("Tokenizing %d %s rows (split %r)", len(ex), role, split)
        tables[role] = build_task_table(task, tokenizer, ex, data)
        stats[role] = {**build_role_stats(ex, task, split, tables[role]),
                       **task.run_table_checks(tokenizer, ex, tables[role], role, data),
                       **({"rows_in_train": shared[role]} if role in shared else {})}
    # What a --resume and a reproduction check they run on (the source may change under a name).
    stats["fingerprints"] = {role: build_table_fingerprint(table) for role, table in tables.items()}
    stats["seconds"] = round(time.perf_counter() - start, 2)
    logger.info("Tokenized %s in %.1fs; trials are selected on %s",
                ", ".join(f"{stats[r]['rows']} {r}" + (f" ({stats[r]['sequences']} sequences)"
                                                          if "sequences" in stats[r] else "") for r in roles),
                stats["seconds"], plan.source)
    return TokenizedData(tables=tables, stats=stats)


def build_task_table(task: Task, tokenizer: Any, examples: Examples, data: DataConfig) -> pa.Table:
    """One role's tokenized table, compact (``data/compact.py``); a chunk at a time when the
    task tokenizes each row on its own (language-model blocks span rows)."""
    def tokenize(part: Examples) -> dict[str, list[Any]]:
        return task.tokenize(tokenizer, part, data)

    if task.tokenizes_rows:
        return build_chunked_table(tokenize, examples)
    return build_compact_table(tokenize(examples))


def build_torch_dataset(table: pa.Table) -> datasets.Dataset:
    """Wrap a tokenized table for the HF Trainer without copying it (the task's collator
    turns rows into tensors)."""
    # An explicit fingerprint: otherwise datasets hashes the whole table with dill (slow on
    # real data, and it prints bytecode into the worker logs).
    return datasets.Dataset(table, fingerprint=uuid.uuid4().hex)
