"""The plain values the task interface exchanges: a split's checked examples, the task's
settings (the job's ``task`` section), the markers tasks agree on, and what a raw cell is."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Marks sub-word positions and padding whose label the loss and the metrics ignore (HF's value).
IGNORED_LABEL = -100
#: Attribute of a model ``Task.build_model`` built: the names of its parameters the pretrained
#: checkpoint did not hold (a new head, DeBERTa's pooler), initialised at random.
NEW_WEIGHTS_ATTR = "ftplat_new_weights"


#: The fix for a split of unlabelled rows (``-1`` in every row: GLUE, SNLI and other
#: benchmarks hide their test labels so).
UNLABELLED_SPLIT_FIX = ("-1 marks a row without a label (GLUE, SNLI and other benchmarks hide their test labels "
                        "so): select and score on splits that have labels (data.test_split: validation, or null for "
                        "no test score), or drop those rows")


#: The least value of each generation option (``Task.generation_defaults``).
GENERATION_LEAST = {"max_new_tokens": 1, "temperature": 0.0}


def build_generation_options(task: Any, given: dict[str, Any], *, spell: Any = str) -> dict[str, Any]:
    """``run_predict``'s generation keywords for ``task``: the ``given`` ones checked, its
    defaults for the rest. ``UserError`` naming the option as ``spell(name)`` spells it
    (``--max-new-tokens``, ``params max_new_tokens``) for a value out of range, or for an
    option given to a task that does not generate. Shared by predict and the MLflow model."""
    from ftplat.errors import UserError

    given = {name: value for name, value in given.items() if value is not None}
    if not task.generates_text:
        if given:
            raise UserError(f"{spell(next(iter(given)))} applies to models that generate text (causal-lm); the model "
                            f"is a {task.name} model: remove it")
        return {}
    options = {}
    for name, default in task.generation_defaults.items():
        value, least = given.get(name, default), GENERATION_LEAST[name]
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        whole = name != "max_new_tokens" or number.is_integer()
        if not (math.isfinite(number) and number >= least and whole):
            kind = "a whole number" if name == "max_new_tokens" else "a number"
            raise UserError(f"{spell(name)} is {value!r}; give {kind} from {least} up")
        options[name] = int(number) if name == "max_new_tokens" else number
    return options


@dataclass
class Examples:
    """One split's checked examples: the model inputs by role (``text``, ``text_pair``,
    ``tokens``) as Python lists, and the labels as one numpy array (rows first; an object array
    of per-row lists for token tags)."""

    inputs: dict[str, list[Any]]
    labels: np.ndarray
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.labels)

    def select(self, idx: np.ndarray) -> Examples:
        return Examples({k: [v[i] for i in idx] for k, v in self.inputs.items()}, self.labels[idx], self.dropped)


@dataclass(frozen=True)
class TaskSettings:
    """The job's ``task`` section as the task sees it (plain values, no config import)."""

    type: str
    threshold: float = 0.5
    #: masked-lm and causal-lm settings (see the task modules).
    mlm_probability: float = 0.15
    line_by_line: bool = False
    packing: bool = False
    chat_template: bool | None = None
    metric_fn: str | None = None
    metric_modes: dict[str, str] = field(default_factory=dict)
    #: The job's ``model.id2label``: the names metrics and label statistics use.
    id2label: dict[int, str] | None = None
    #: The job's ``data.max_length``, as an export's ``ftplat_task.json`` records it: serving
    #: reads no more tokens than training and test scoring did (None: the tokenizer's limit).
    max_length: int | None = None
    #: Whether the model was trained on sentence pairs (``data.text_pair_column``), as an
    #: export records it for a task that takes pairs; None: not recorded (older exports, and
    #: models from elsewhere), so either is read.
    text_pair: bool | None = None
    #: causal-lm: the job's ``data.prompt_column`` when it lists several columns, as an export
    #: records it: serving joins a table's columns of these names as training joined them.
    prompt_columns: list[str] | None = None


def build_load_dtype(name: str) -> Any:
    """``from_pretrained``'s ``dtype`` for ``model.dtype`` (``float32``, ``bfloat16``, ``auto``)."""
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def is_missing_value(value: Any) -> bool:
    """A missing cell: None, or NaN (CSV readers give an empty field as null, or as NaN when
    the whole column is empty; pandas fills absent text pairs with NaN)."""
    return value is None or (isinstance(value, float) and value != value)


def column_list(ds: Any, column: str) -> list[Any]:
    values = ds[column]
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)
