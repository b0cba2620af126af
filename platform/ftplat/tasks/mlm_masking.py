"""masked-lm's masks: drawn for every training batch (run_mlm.py's dynamic masking), drawn
once for an evaluation table.

``DataCollatorForLanguageModeling`` masks each batch it collates, evaluation batches included,
with the process's random state: each evaluation of a checkpoint then scored other tokens, and
the noise chose best checkpoints and scope scores (two checkpoints' perplexities swapped order
from one draw to the next). Here an evaluation table is masked once, seeded by
``data.validation.seed`` (which no trial varies: ``training.seed`` can be searched) at the
trial's ``task.mlm_probability``, and keeps its labels; the collator masks only rows that come
without labels (training's).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from transformers import DataCollatorForLanguageModeling, DataCollatorForTokenClassification

from ftplat.tasks.base import IGNORED_LABEL

#: Rows masked at a time (padded to the longest of them).
MASK_ROWS = 1024


class MaskOnceCollator(DataCollatorForLanguageModeling):
    """Masks the batches whose rows have no labels; pads those that bring their own (an
    evaluation table masked once) with the labels padded as ignored."""

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        if not examples or not isinstance(examples[0], dict) or "labels" not in examples[0]:
            return super().torch_call(examples)
        # Padding inputs and labels (ignored) on the tokenizer's side is what the token
        # classification collator does.
        return DataCollatorForTokenClassification(self.tokenizer, pad_to_multiple_of=self.pad_to_multiple_of,
                                                  label_pad_token_id=IGNORED_LABEL)(examples)


def build_masked_table(table: pa.Table, tokenizer: Any, *, mlm_probability: float, seed: int) -> pa.Table:
    """``table`` with its ``input_ids`` masked as training masks them and a ``labels`` column
    (the original ids at masked positions, ignored elsewhere), the same for the same seed;
    ``MASK_ROWS`` rows at a time. Both are int32 (a random replacement token can be any id of
    the vocabulary, past what the table's narrowed type holds); other columns stay as they are."""
    if table.num_rows == 0:
        return table
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=mlm_probability, seed=seed)
    left = tokenizer.padding_side == "left"
    ids_type = pa.list_(pa.int32())
    chunks = []
    for start in range(0, table.num_rows, MASK_ROWS):
        part = table.slice(start, MASK_ROWS)
        rows = part.to_pylist()
        batch = collator([dict(r) for r in rows])
        width = batch["input_ids"].shape[1]
        masked, labels = [], []
        for i, row in enumerate(rows):
            # The collator pads to the longest row: each row keeps its own positions.
            n = len(row["input_ids"])
            keep = slice(width - n, None) if left else slice(0, n)
            masked.append(batch["input_ids"][i, keep].tolist())
            labels.append(batch["labels"][i, keep].tolist())
        columns = {name: part.column(name) for name in table.column_names}
        columns["input_ids"] = pa.array(masked, type=ids_type)
        columns["labels"] = pa.array(labels, type=ids_type)
        chunks.append(pa.table(columns))
    return pa.concat_tables(chunks)
