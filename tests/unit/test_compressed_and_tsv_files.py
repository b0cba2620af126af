"""A local folder's compressed CSV/JSON files (``train.jsonl.gz``, ``test.csv.bz2``, the form
corpora are often shipped in) and TSV files (GLUE's) are read as their splits; a TSV field is
taken as written, quotes included."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pytest

from ftplat.config.schema import DataConfig
from ftplat.data.sources import load_raw_splits, read_file_format

COLUMNS = {"text_column": "text", "label_column": "label"}


def rows_of(loaded: dict) -> dict:
    return {split: ds.to_list() for split, ds in loaded.items()}


def test_compressed_json_lines_and_csv_are_read_as_their_splits(tmp_path):
    with gzip.open(tmp_path / "train-00000-of-00002.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": "first", "label": 1}) + "\n")
    with lzma.open(tmp_path / "train-00001-of-00002.jsonl.xz", "wt") as f:
        f.write(json.dumps({"text": "second", "label": 0}) + "\n")
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "plain", "label": 1}) + "\n")
    loaded = load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train"], optional=["test"])
    assert rows_of(loaded) == {"train": [{"text": "first", "label": 1}, {"text": "second", "label": 0}],
                               "test": [{"text": "plain", "label": 1}]}

    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    with bz2.open(csv_dir / "train.csv.bz2", "wt") as f:
        f.write("text,label\nNone,1\n")  # a text "None" stays a text, as in an uncompressed CSV
    loaded = load_raw_splits(DataConfig(source=str(csv_dir)), COLUMNS, required=["train"])
    assert rows_of(loaded) == {"train": [{"text": "None", "label": 1}]}


def test_tsv_fields_are_taken_as_written(tmp_path):
    # An unbalanced quote in a field: read with CSV quoting, it swallowed the rows after it.
    (tmp_path / "train.tsv").write_text('text\tlabel\nhe said "hi there\t1\nnext row\t0\nNA\t1\n')
    loaded = load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train"])
    assert rows_of(loaded) == {"train": [{"text": 'he said "hi there', "label": 1}, {"text": "next row", "label": 0},
                                         {"text": "NA", "label": 1}]}


def test_a_file_kept_beside_its_compressed_copy_is_refused(tmp_path):
    # gzip -k: both read as one split, every row counted twice.
    (tmp_path / "train.csv").write_text("text,label\na,1\n")
    with gzip.open(tmp_path / "train.csv.gz", "wt") as f:
        f.write("text,label\na,1\n")
    with pytest.raises(ValueError, match=r"holds train.csv both as it is and compressed; keep one of them"):
        load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train"])


def test_a_folder_mixing_csv_and_tsv_is_refused(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\na\t1\n")
    (tmp_path / "test.csv").write_text("text,label\nb,0\n")
    with pytest.raises(ValueError, match=r"mixes file formats \['csv', 'tsv'\]"):
        load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train"], optional=["test"])


@pytest.mark.parametrize("name, expected", [
    ("train.jsonl.gz", ("json", "train")), ("test_part1.CSV.bz2", ("csv", "test_part1")), ("dev.tsv", ("tsv", "dev")),
    ("train.parquet", ("parquet", "train")), ("train.parquet.gz", (None, "train.parquet.gz")),
    ("data.tar.gz", (None, "data.tar.gz")), ("README.md", (None, "README.md")), (".gz", (None, ".gz")),
])
def test_file_formats(name, expected):
    assert read_file_format(name) == expected
