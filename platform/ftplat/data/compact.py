"""Tokenized columns as compact Arrow, built a chunk at a time.

A tokenizer returns Python lists: about 36 bytes per token id (an int object and its list
slot) against 4 in an int32 array, and ``pa.table`` of such lists makes int64 columns. Built
whole, a 200,000-review split at max_length 160 peaked at 14 GB in the driver for a 0.73 GB
table. Here a task that tokenizes each row on its own gets its rows in chunks, and each
chunk's columns become Arrow at once, every integer column in the narrowest type its values
fit (ids int32 or int16, masks and class labels int8); float columns are left as they are.
The Trainer's collator turns rows back into int64 tensors, so the model sees the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: Rows tokenized at a time: the Python lists of one chunk are the driver's peak, not the split's.
CHUNK_ROWS = 8192

_NARROW = (pa.int8(), pa.int16(), pa.int32())


def narrow_integers(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """An integer (or list-of-integer) column in the narrowest signed type holding its values."""
    values_type = array.type.value_type if pa.types.is_list(array.type) else array.type
    if not pa.types.is_integer(values_type):
        return array
    flat = pc.list_flatten(array) if pa.types.is_list(array.type) else array
    bounds = pc.min_max(flat)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None:  # no values: nothing to fit
        return array
    for narrow in _NARROW:
        info_max = 2 ** (narrow.bit_width - 1) - 1
        if -info_max - 1 <= low and high <= info_max:
            target = pa.list_(narrow) if pa.types.is_list(array.type) else narrow
            return array.cast(target)
    return array


def build_compact_table(columns: dict[str, list[Any]]) -> pa.Table:
    """One table from tokenized columns, integers narrowed."""
    return pa.table({name: narrow_integers(pa.array(values)) for name, values in columns.items()})


def build_chunked_table(tokenize: Callable[[Any], dict[str, list[Any]]], examples: Any, *,
                        chunk_rows: int = CHUNK_ROWS) -> pa.Table:
    """``tokenize`` applied to ``examples`` (``select``-able, ``len``) ``chunk_rows`` at a time,
    each chunk narrowed as soon as it is Arrow (its lists dropped), then every chunk's column
    cast to the widest type any chunk needed."""
    import numpy as np

    chunks = [build_compact_table(tokenize(examples.select(np.arange(start, min(start + chunk_rows, len(examples))))))
              for start in range(0, len(examples), chunk_rows)]
    if len(chunks) <= 1:
        return chunks[0] if chunks else build_compact_table(tokenize(examples))
    schema = pa.schema([pa.field(name, max((c.schema.field(name).type for c in chunks), key=_width))
                        for name in chunks[0].column_names])
    return pa.concat_tables([c.cast(schema) for c in chunks])


def build_table_fingerprint(table: pa.Table) -> dict[str, Any]:
    """The table's rows and a hash of its columns (blake2b of each column's type, values and
    row lengths, whatever its chunking): two tables of the same tokenized data share it."""
    import hashlib

    import numpy as np

    def values_bytes(array: pa.Array) -> bytes:
        if pa.types.is_integer(array.type) or pa.types.is_floating(array.type):
            return np.asarray(array.fill_null(0)).tobytes()
        return "\x00".join(map(str, array.to_pylist())).encode()

    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(table.column_names):
        column = table.column(name)
        values, lengths = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)
        for chunk in column.chunks:
            if pa.types.is_list(chunk.type):
                lengths.update(np.asarray(pc.list_value_length(chunk).fill_null(0), dtype=np.int64).tobytes())
                chunk = pc.list_flatten(chunk)
            values.update(values_bytes(chunk))
        digest.update(f"{name}:{column.type}".encode() + values.digest() + lengths.digest())
    return {"rows": table.num_rows, "blake2b": digest.hexdigest()}


def _width(t: pa.DataType) -> int:
    values = t.value_type if pa.types.is_list(t) else t
    return values.bit_width if pa.types.is_integer(values) or pa.types.is_floating(values) else 0
