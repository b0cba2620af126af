"""Tokenized tables are compact Arrow built a chunk at a time, and the Trainer still sees the
same int64 inputs (data/compact.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from ftplat.data.compact import build_chunked_table, build_compact_table, narrow_integers
from ftplat.tasks.base import Examples


@pytest.mark.parametrize("values, expected", [
    ([0, 1, 127], pa.int8()), ([-100, 5], pa.int8()), ([0, 128], pa.int16()), ([30521, 0], pa.int16()),
    ([40000], pa.int32()), ([2**40], pa.int64()),
])
def test_integers_take_the_narrowest_type_their_values_fit(values, expected):
    assert narrow_integers(pa.array(values)).type == expected
    assert narrow_integers(pa.array([values, []])).type == pa.list_(expected)
    assert narrow_integers(pa.array([values])).to_pylist() == [values]


def test_floats_and_strings_are_left_alone():
    for array in (pa.array([0.5, 1.0]), pa.array([[1.0, 0.0]]), pa.array(["a"]), pa.array([], pa.int64())):
        assert narrow_integers(array).type == array.type


def tokenize(part: Examples) -> dict:
    ids = [[101, *range(int(v) * 50, int(v) * 50 + 3), 102] for v in part.labels]
    return {"input_ids": ids, "attention_mask": [[1] * len(r) for r in ids], "labels": part.labels.tolist(),
            "score": [float(v) / 2 for v in part.labels]}


def test_chunks_make_the_same_table_as_one_pass_with_one_schema():
    examples = Examples({"text": [f"t{i}" for i in range(11)]}, np.arange(11))
    whole = build_compact_table(tokenize(examples))
    # The last chunk needs int16 ids (10 * 50 > 127), the first fit int8: all chunks are cast up.
    chunked = build_chunked_table(tokenize, examples, chunk_rows=3)
    assert chunked.schema == whole.schema
    assert chunked.schema.field("input_ids").type == pa.list_(pa.int16())
    assert chunked.schema.field("attention_mask").type == pa.list_(pa.int8())
    assert chunked.schema.field("labels").type == pa.int8() and chunked.schema.field("score").type == pa.float64()
    assert chunked.to_pylist() == whole.to_pylist() == pa.table(tokenize(examples)).to_pylist()
    assert chunked.nbytes < pa.table(tokenize(examples)).nbytes / 3


def test_the_collator_turns_narrow_columns_into_int64_tensors(tiny_model_dir):
    from transformers import AutoTokenizer, DataCollatorWithPadding

    from ftplat.data.preparation import build_torch_dataset

    examples = Examples({"text": ["a", "b"]}, np.arange(2))
    dataset = build_torch_dataset(build_chunked_table(tokenize, examples))
    batch = DataCollatorWithPadding(AutoTokenizer.from_pretrained(tiny_model_dir))(
        [{k: v for k, v in row.items() if k != "score"} for row in dataset])
    assert batch["input_ids"].dtype == batch["labels"].dtype == torch.int64
    assert batch["input_ids"].tolist() == tokenize(examples)["input_ids"]


def test_a_tables_fingerprint_follows_its_data_not_its_chunking():
    from ftplat.data.compact import build_table_fingerprint

    table = build_compact_table({"input_ids": [[1, 2, 3], [4, 5], [6]], "label": [0, 1, 0], "score": [0.5, 1.0, 2.0]})
    rechunked = pa.concat_tables([table.slice(0, 1), table.slice(1, 2)])
    assert build_table_fingerprint(rechunked) == build_table_fingerprint(table)
    assert build_table_fingerprint(table)["rows"] == 3
    moved = build_compact_table({"input_ids": [[1, 2], [3, 4, 5], [6]], "label": [0, 1, 0], "score": [0.5, 1.0, 2.0]})
    relabelled = build_compact_table({"input_ids": [[1, 2, 3], [4, 5], [6]], "label": [0, 1, 1],
                                      "score": [0.5, 1.0, 2.0]})
    fingerprints = {build_table_fingerprint(t)["blake2b"] for t in (table, moved, relabelled)}
    assert len(fingerprints) == 3
