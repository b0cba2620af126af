"""``token-classification``: a tag per word (named entities, CoNLL style).

Each row holds a list of words (``data.tokens_column``) and a list of as many tags
(``data.label_column``, e.g. ``ner_tags``): ids or names of ``model.id2label``, whose names are
IOB2-style tags (``O``, ``B-PER``, ``I-PER``...). Words are tokenized with
``is_split_into_words`` (a byte-level BPE tokenizer with ``add_prefix_space``, so that a word is
encoded as in running text) and the tags aligned with the fast tokenizer's ``word_ids()``: the first
sub-token of a word gets the word's tag, later sub-tokens and special tokens get
``IGNORED_LABEL`` (``run_ner.py``'s default, ``label_all_tokens=False``). Precision, recall and
F1 are seqeval's entity-level micro averages (default mode, as ``run_ner.py``), accuracy is
over the labelled tokens.

The metrics need the tag names: the task instance learns them from ``model.id2label`` when it
builds labels or the model, or from :meth:`TokenClassification.bind_model`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.base import IGNORED_LABEL, Task, column_list, is_missing_value
from ftplat.tasks.text_classification import build_class_ids
from ftplat.tasks.word_tokens import build_window_overlap, run_add_prefix_space, run_truncation_checks

#: Tag prefixes seqeval's default mode reads (IOB1/IOB2/IOBES); ``O`` is outside any entity.
TAG_PREFIXES = ("B", "I", "E", "S")
OUTSIDE_TAG = "O"
ID2LABEL_EXAMPLE = "{0: O, 1: B-PER, 2: I-PER, 3: B-LOC, 4: I-LOC}"
def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1)


def check_tag_name(name: Any) -> None:
    """ValueError unless ``name`` is ``O`` or ``<B|I|E|S>-<type>`` (what seqeval reads)."""
    if name == OUTSIDE_TAG:
        return
    if not (isinstance(name, str) and len(name) > 2 and name[0] in TAG_PREFIXES and name[1] == "-"):
        raise ValueError(f"model.id2label names tag {name!r}, which is not an IOB tag: token-classification scores "
                         f"entities with seqeval, which reads tags as O or B-/I-/E-/S-<type>; name the tags like "
                         f"model.id2label: {ID2LABEL_EXAMPLE}")


def build_tag_feature(feature: Any) -> Any:
    """The feature of one tag in a ``datasets`` list feature (``Sequence(ClassLabel(...))``,
    shown as ``List`` by datasets 4+); None when the column is not such a list."""
    if type(feature).__name__ in ("Sequence", "List", "LargeList"):
        return getattr(feature, "feature", None)
    return None


class TokenClassification(Task):
    name = "token-classification"
    metrics = {"precision": "max", "recall": "max", "f1": "max", "accuracy": "max", "loss": "min"}
    default_metric = "f1"
    description = "Token classifier"
    pipeline_task = "token-classification"
    auto_model = "AutoModelForTokenClassification"
    peft_task_type = "TOKEN_CLS"
    accepts_text_pair = False

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        #: The tag names by id (``model.id2label``; ``build_task(job)`` passes them in).
        self.id2label: dict[int, str] | None = (
            {int(k): str(v) for k, v in settings.id2label.items()} if settings.id2label else None)

    def bind_model(self, model: Any) -> TokenClassification:
        """Take the tag names from ``model.id2label`` when the task was built without them
        (from a task section alone); returns the task."""
        if model.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in model.id2label.items()}
        return self

    # --- configuration -------------------------------------------------------------------
    def check_job(self, job: Any) -> None:
        if job.data.text_pair_column is not None:
            raise ValueError("data.text_pair_column applies to sentence-level tasks, not task.type "
                             "token-classification (it reads a list of words per row from data.tokens_column "
                             f"{job.data.tokens_column!r}); remove it")
        self.check_inputs_and_loss(job)
        if job.data.label_columns is not None:
            raise ValueError("data.label_columns (several 0/1 columns) is for task.type multi-label-classification; "
                             "task.type token-classification reads a list of tags per row from data.label_column "
                             "(e.g. ner_tags); remove data.label_columns")
        id2label = job.model.id2label
        if not id2label:
            raise ValueError("model.id2label is required for task.type token-classification: the metrics (seqeval) "
                             "find entities from the tag names; give the tags in the order of their ids, e.g. "
                             f"model.id2label: {ID2LABEL_EXAMPLE}")
        if job.model.num_labels != len(id2label):
            raise ValueError(f"model.num_labels is {job.model.num_labels} but model.id2label names {len(id2label)} "
                             "tags; remove model.num_labels (it defaults to the size of model.id2label)")
        if len(id2label) < 2:
            raise ValueError(f"model.id2label names {len(id2label)} tag; task.type token-classification needs at least "
                             f"2 (O and an entity tag), e.g. model.id2label: {ID2LABEL_EXAMPLE}")
        names = [id2label[k] for k in sorted(id2label)]
        for name in names:
            check_tag_name(name)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"model.id2label names tags {repeated} more than once; give each tag one id")
        if all(n == OUTSIDE_TAG for n in names):
            raise ValueError(f"model.id2label has no entity tag (only O); e.g. model.id2label: {ID2LABEL_EXAMPLE}")

    def read_columns(self, data: Any) -> dict[str, str]:
        return {"tokens_column": data.tokens_column, "label_column": data.label_column}

    # --- data ----------------------------------------------------------------------------
    def build_inputs(self, ds: Any, data: Any, split: str | None = None) -> dict[str, list[Any]]:
        """``tokens``: a list of words per row. Missing rows and empty lists pass through (the
        data preparation drops or refuses empty examples); anything else not a list of
        strings is a UserError naming the row."""
        split = split if split is not None else str(getattr(ds, "split", None) or "?")
        rows = []
        for row, words in enumerate(column_list(ds, data.tokens_column)):
            if is_missing_value(words):
                rows.append(words)
                continue
            where = f"data.tokens_column {data.tokens_column!r} of split {split!r} row {row}"
            if not _is_sequence(words):
                raise UserError(f"{where} is {type(words).__name__} {words!r:.40}, not a list of words; "
                                "token-classification needs a list column (parquet, JSON lines or a hub dataset; "
                                "CSV cannot hold lists), e.g. tokens: [John, lives, in, Paris]")
            bad = [w for w in words if not isinstance(w, str)]
            if bad:
                raise UserError(f"{where} holds {type(bad[0]).__name__} {bad[0]!r:.40}, not a word (string); "
                                "point data.tokens_column at the column of words")
            rows.append(list(words))
        return {"tokens": rows}

    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        """An object array with one list of tag ids per row, as many as the row's words."""
        self.bind_model(model)
        words = column_list(ds, data.tokens_column)
        tags = column_list(ds, data.label_column)
        flat: list[Any] = []
        lengths: list[int] = []
        for row, (row_words, row_tags) in enumerate(zip(words, tags)):
            where = f"data.label_column {data.label_column!r} of split {split!r} row {row}"
            if not _is_sequence(row_tags):
                raise UserError(f"{where} is {type(row_tags).__name__} {row_tags!r:.40}, not a list of tags (one per "
                                f"word of data.tokens_column {data.tokens_column!r}); point data.label_column at the "
                                "tags column, e.g. ner_tags")
            n_words = len(row_words) if _is_sequence(row_words) else 0
            if len(row_tags) != n_words:
                raise UserError(f"{where} has {len(row_tags)} tags but data.tokens_column {data.tokens_column!r} has "
                                f"{n_words} words; every word needs exactly one tag")
            missing = [i for i, tag in enumerate(row_tags) if is_missing_value(tag)]
            if missing:  # named here, by its row: the flattened tags have no rows
                raise UserError(f"{where} has no tag for word {missing[0]}; every word needs one (O outside an "
                                "entity): fix or drop the row")
            flat.extend(row_tags)
            lengths.append(len(row_tags))
        if flat:
            features = getattr(ds, "features", None) or {}
            ids = build_class_ids(flat, feature=build_tag_feature(features.get(data.label_column)),
                                  column=f"label_column {data.label_column!r}", data=data, model=model, split=split)
        else:
            ids = np.zeros(0, dtype=np.int64)
        labels = np.empty(len(lengths), dtype=object)
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        for row in range(len(lengths)):
            labels[row] = [int(i) for i in ids[offsets[row]:offsets[row + 1]]]
        return labels

    def build_stratify_key(self, labels: np.ndarray) -> None:
        """None: subsets and hold-outs are drawn at random (a row has many tags)."""
        return None

    def build_label_stats(self, labels: np.ndarray) -> dict[str, Any]:
        """Tag counts (by name once the tag names are known, else by id) and entity count."""
        counts: dict[int, int] = {}
        for row in labels:
            for tag in row:
                counts[int(tag)] = counts.get(int(tag), 0) + 1
        if self.id2label is None:
            return {"label_counts": {k: counts[k] for k in sorted(counts)}}
        from seqeval.metrics.sequence_labeling import get_entities

        entities = sum(len(get_entities([self.id2label[int(t)] for t in row])) for row in labels)
        return {"label_counts": {self.id2label[k]: counts[k] for k in sorted(counts)}, "entity_count": entities}

    def tokenize(self, tokenizer: Any, examples: Any, data: Any) -> dict[str, list[Any]]:
        """Sub-word inputs and aligned labels: a word's tag on its first sub-token, IGNORED_LABEL
        on later sub-tokens, special tokens and padding."""
        if not getattr(tokenizer, "is_fast", False):
            raise UserError(f"model.name_or_path {getattr(tokenizer, 'name_or_path', '?')!r} has a slow (Python) "
                            f"tokenizer ({type(tokenizer).__name__}); token-classification aligns tags to words with a "
                            "fast tokenizer's word_ids(); choose a model that ships a fast tokenizer (tokenizer.json)")
        words = [list(w) for w in examples.inputs["tokens"]]
        encoded = tokenizer(words, is_split_into_words=True, truncation=True, max_length=data.max_length,
                            padding="max_length" if data.pad_to_max_length else False)
        columns = {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded}
        aligned = []
        for i, tags in enumerate(examples.labels):
            row, previous = [], None
            for word in encoded.word_ids(i):
                row.append(IGNORED_LABEL if word is None or word == previous else int(tags[word]))
                previous = word
            aligned.append(row)
        columns["labels"] = aligned
        return columns

    def run_table_checks(self, tokenizer: Any, examples: Any, table: Any, role: str, data: Any) -> dict[str, Any]:
        """Words past data.max_length are neither trained nor scored: their entities count
        neither as found nor as missed (serving tags them, in windows)."""
        return run_truncation_checks(tokenizer, examples.inputs["tokens"], examples.labels, table, role=role,
                                     max_length=data.max_length, id2label=self.id2label)

    def prepare_tokenizer(self, tokenizer: Any) -> Any:
        """A byte-level BPE tokenizer (RoBERTa, Longformer, GPT-2, BLOOM, DeBERTa) encodes a word
        with the space before it only when told to: training encodes each word alone
        (``is_split_into_words``) and would get 'Sm','ith' where serving raw text gets 'ĠSmith'.
        With ``add_prefix_space`` (as run_ner.py loads them) both get 'ĠSmith'; it is set on the
        tokenizer in place, and saved with it in every checkpoint and export."""
        return run_add_prefix_space(super().prepare_tokenizer(tokenizer))

    def build_collator(self, tokenizer: Any) -> Any:
        from transformers import DataCollatorForTokenClassification

        return DataCollatorForTokenClassification(tokenizer)

    # --- model ---------------------------------------------------------------------------
    def build_model(self, model: Any, tokenizer: Any = None) -> Any:
        self.bind_model(model)
        return super().build_model(model, tokenizer)

    # --- metrics -------------------------------------------------------------------------
    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """seqeval's entity-level micro precision, recall and F1 and the token accuracy, over
        the labelled positions; logits (N, L, K) or predicted ids (N, L)."""
        from seqeval.metrics import f1_score, precision_score, recall_score

        if self.id2label is None:
            raise RuntimeError("token-classification metrics need the tag names: build the task with build_task(job) "
                               "(or task.build_model) on the task instance whose compute_metrics the Trainer uses")
        labels = np.asarray(labels)
        preds = np.asarray(predictions)
        if preds.ndim == labels.ndim + 1:
            preds = preds.argmax(axis=-1)
        true_rows, pred_rows = [], []
        for pred_row, label_row in zip(preds, labels):
            keep = label_row != IGNORED_LABEL
            true_rows.append([self.id2label[int(t)] for t in label_row[keep]])
            pred_rows.append([self.id2label.get(int(p), OUTSIDE_TAG) for p in pred_row[keep]])
        total = sum(len(r) for r in true_rows)
        if not total:
            return {"precision": float("nan"), "recall": float("nan"), "f1": float("nan"), "accuracy": float("nan")}
        correct = sum(t == p for tr, pr in zip(true_rows, pred_rows) for t, p in zip(tr, pr))
        pairs = [(tr, pr) for tr, pr in zip(true_rows, pred_rows) if tr]
        true_rows, pred_rows = [tr for tr, _ in pairs], [pr for _, pr in pairs]
        return {
            "precision": float(precision_score(true_rows, pred_rows, zero_division=0)),
            "recall": float(recall_score(true_rows, pred_rows, zero_division=0)),
            "f1": float(f1_score(true_rows, pred_rows, zero_division=0)),
            "accuracy": correct / total,
        }

    # --- serving -------------------------------------------------------------------------
    def build_pipeline_kwargs(self) -> dict[str, Any]:
        """Whole words tagged by their first sub-token, the one training labels (the later ones
        were never trained), and merged into entities (``B-PER I-PER`` -> one ``PER``).

        A text longer than ``data.max_length`` is tagged in overlapping windows of that length
        (HF's ``stride``; the pipeline merges the entities the windows share), so every word is
        tagged in a context as long as training's, and none past the first window is dropped."""
        kwargs: dict[str, Any] = {"aggregation_strategy": "first"}
        if self.settings.max_length is not None:
            kwargs["stride"] = build_window_overlap(self.settings.max_length)
        return kwargs

    def build_predict_call_kwargs(self) -> dict[str, Any]:
        return {}

    def format_prediction(self, result: Any) -> dict[str, Any]:
        """The entities the pipeline found in one text."""
        entities = []
        for entity in result:
            start, end = entity.get("start"), entity.get("end")
            entities.append({
                "entity": entity.get("entity_group", entity.get("entity")),
                "word": entity["word"],
                "start": None if start is None else int(start),
                "end": None if end is None else int(end),
                "score": round(float(entity["score"]), 6),
            })
        return {"entities": entities}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        return ", ".join(f"{e['entity']}:{e['word']}" for e in prediction["entities"]) or "-"

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        length = self.settings.max_length
        stride = "" if length is None else f", stride={build_window_overlap(length)}"
        lines = ["from transformers import pipeline",
                 f'ner = pipeline("{self.pipeline_task}", model="<this directory>", '
                 f'aggregation_strategy="first"{stride})']
        if self.settings.max_length is not None:
            lines.append(f"ner.tokenizer.model_max_length = {self.settings.max_length}  # the length it trained on")
        return lines + ['ner(["John Smith lives in Paris"])  # [[{"entity_group": "PER", "word": "john smith", ...}]]']

