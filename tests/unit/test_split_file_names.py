"""A local folder's files name their split: the name without the extension and any shard
number, so split names with ``_`` or ``-`` in them (MNLI's ``validation_matched``) stay apart,
and every shard layout (``train-00000-of-00002``, ``test_part1``, ``train-0``) still joins its split."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ftplat.config.schema import DataConfig
from ftplat.data.sources import load_raw_splits

COLUMNS = {"text_column": "text"}


def write_parquet(folder, name: str, split: str, rows: int) -> None:
    pq.write_table(pa.table({"text": [f"{split} {i}" for i in range(rows)], "label": [i % 2 for i in range(rows)]}),
                   folder / name)


def splits_of(loaded: dict) -> dict:
    """``{split: (rows, the split names written into its texts)}``."""
    return {name: (len(ds), sorted({t.split()[0] for t in ds["text"]})) for name, ds in loaded.items()}


@pytest.fixture
def mnli(tmp_path):
    """The hub's MNLI layout: split names with ``_``, one shard each."""
    for split, rows in [("train", 6), ("validation_matched", 3), ("validation_mismatched", 4), ("test_matched", 2)]:
        write_parquet(tmp_path, f"{split}-00000-of-00001.parquet", split, rows)
    return tmp_path


def test_split_names_with_underscores_stay_apart(mnli):
    cfg = DataConfig(source=str(mnli), validation={"split": "validation_matched"}, test_split="test_matched")
    loaded = load_raw_splits(cfg, COLUMNS, required=["train", "validation_matched"], optional=["test_matched"])
    assert splits_of(loaded) == {"train": (6, ["train"]), "validation_matched": (3, ["validation_matched"]),
                                 "test_matched": (2, ["test_matched"])}


def test_no_split_is_made_up_from_a_prefix(mnli):
    loaded = load_raw_splits(DataConfig(source=str(mnli)), COLUMNS, required=["train"], optional=["validation", "test"])
    assert splits_of(loaded) == {"train": (6, ["train"])}
    with pytest.raises(ValueError, match=r"no files for split\(s\) \['validation'\] \(found splits \['test_matched', "
                                         r"'train', 'validation_matched', 'validation_mismatched'\]\)"):
        load_raw_splits(DataConfig(source=str(mnli)), COLUMNS, required=["train", "validation"])


def test_shards_join_their_split(tmp_path):
    write_parquet(tmp_path, "train-00000-of-00002.parquet", "train", 3)
    write_parquet(tmp_path, "train-00001-of-00002.parquet", "train", 2)
    write_parquet(tmp_path, "train_dev-0.parquet", "train_dev", 1)
    write_parquet(tmp_path, "train_dev-1.parquet", "train_dev", 1)
    write_parquet(tmp_path, "test.parquet", "test", 2)
    loaded = load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train", "train_dev"],
                             optional=["test"])
    assert splits_of(loaded) == {"train": (5, ["train"]), "train_dev": (2, ["train_dev"]), "test": (2, ["test"])}


def test_csv_parts_join_their_split(tmp_path):
    for name, split in [("train_part1.csv", "train"), ("train_part2.csv", "train"), ("dev-matched.csv", "dev-matched")]:
        pacsv.write_csv(pa.table({"text": [f"{split} a", f"{split} b"], "label": [0, 1]}), tmp_path / name)
    loaded = load_raw_splits(DataConfig(source=str(tmp_path)), COLUMNS, required=["train", "dev-matched"])
    assert splits_of(loaded) == {"train": (4, ["train"]), "dev-matched": (2, ["dev-matched"])}
