"""The validation protocol: which split selects trials (a validation split, a stratified
hold-out of train, or a split the job names), the test role, and where the data comes from.

Every row's text encodes its split and index in words of the tiny tokenizer's vocabulary, so
each tokenized row is traced back to the raw row it came from with the model's own tokenizer,
independently of the preparation code.
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from tiny_assets import NEUTRAL

from ftplat.config.schema import DataConfig, JobConfig, ModelConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.errors import UserError

SPLIT_WORD = {"train": 0, "validation": 1, "test": 2, "dev": 3, "heldout": 4}


def row_text(split: str, i: int) -> str:
    """A text unique to (split, i): the split's word, then i in base 20 over NEUTRAL."""
    return " ".join([NEUTRAL[SPLIT_WORD[split]]] + [NEUTRAL[(i // 20 ** k) % 20] for k in range(3)])


def quarter_label(i: int) -> int:
    """One row in four is class 1: 75% / 25%."""
    return int(i % 4 == 3)


def build_rows(split: str, n: int) -> dict[str, list]:
    return {"text": [row_text(split, i) for i in range(n)], "label": [quarter_label(i) for i in range(n)]}


def write_splits(folder, sizes: dict[str, int], fmt: str = "parquet"):
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        rows = build_rows(split, n)
        if fmt == "parquet":
            pq.write_table(pa.table(rows), folder / f"{split}.parquet")
        elif fmt == "csv":
            pacsv.write_csv(pa.table(rows), folder / f"{split}.csv")
        else:
            lines = [json.dumps({"text": t, "label": y}) for t, y in zip(rows["text"], rows["label"])]
            (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def origin(tiny_model_dir):
    """``origin(table)``: the (split, row index) of every tokenized row of ``table``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    index = {}
    for split in SPLIT_WORD:
        texts = [row_text(split, i) for i in range(400)]
        for i, ids in enumerate(tokenizer(texts)["input_ids"]):
            index[tuple(ids)] = (split, i)
    assert len(index) == 400 * len(SPLIT_WORD)  # every text tokenizes to its own ids

    def trace(table: pa.Table) -> list[tuple[str, int]]:
        rows = [index[tuple(ids)] for ids in table["input_ids"].to_pylist()]
        # each tokenized row still carries its own raw row's label
        assert table["labels"].to_pylist() == [quarter_label(i) for _, i in rows]
        return rows

    return trace


def prepare(tiny_model_dir, **data) -> tuple:
    job = JobConfig(data=DataConfig(**data), model=ModelConfig(name_or_path=str(tiny_model_dir)))
    return build_tokenized_tables(job)


def counts(labels) -> dict[int, int]:
    return dict(sorted(Counter(labels).items()))


# --- the hold-out ---------------------------------------------------------------------------
@pytest.mark.parametrize("holdout, held", [(0.1, 20), (0.25, 50), (40, 40), (1, 1)])
def test_holdout_is_stratified_and_disjoint_from_train(tmp_path, tiny_model_dir, origin, holdout, held):
    source = write_splits(tmp_path / "data", {"train": 200, "test": 40})
    out = prepare(tiny_model_dir, source=str(source), validation={"holdout": holdout})
    train, held_out, test = origin(out.train), origin(out.eval), origin(out.tables["test"])

    assert out.stats["selection"] == "held out of the train split"
    assert len(held_out) == held and len(train) == 200 - held
    assert {s for s, _ in train} == {s for s, _ in held_out} == {"train"}
    assert not set(train) & set(held_out)
    assert sorted(train + held_out) == [("train", i) for i in range(200)]
    # stratified: 150 / 50 in train, the hold-out keeps 3:1 (largest remainder on a .5 tie)
    ones = sum(quarter_label(i) for _, i in held_out)
    assert abs(ones - held / 4) <= 0.5
    assert out.stats["eval"] == {"split": "train (held out)", "rows": held,
                                 "label_counts": counts(quarter_label(i) for _, i in held_out)}
    assert out.stats["train"] == {"split": "train", "rows": 200 - held,
                                  "label_counts": counts(quarter_label(i) for _, i in train)}
    assert sorted(test) == [("test", i) for i in range(40)]
    assert out.stats["test"] == {"split": "test", "rows": 40, "label_counts": {0: 30, 1: 10}}


def test_holdout_exact_class_counts(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "test": 40})
    for holdout, expected in ((0.1, {0: 15, 1: 5}), (40, {0: 30, 1: 10}), (0.2, {0: 30, 1: 10})):
        out = prepare(tiny_model_dir, source=str(source), validation={"holdout": holdout})
        assert counts(out.eval["labels"].to_pylist()) == expected
        assert counts(out.train["labels"].to_pylist()) == {0: 150 - expected[0], 1: 50 - expected[1]}


def test_holdout_is_seeded_and_reproducible(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "test": 40})
    first = prepare(tiny_model_dir, source=str(source), validation={"holdout": 0.1, "seed": 7})
    again = prepare(tiny_model_dir, source=str(source), validation={"holdout": 0.1, "seed": 7})
    other = prepare(tiny_model_dir, source=str(source), validation={"holdout": 0.1, "seed": 8})
    assert first.eval.equals(again.eval) and first.train.equals(again.train)
    assert set(origin(first.eval)) != set(origin(other.eval))
    assert counts(first.eval["labels"].to_pylist()) == counts(other.eval["labels"].to_pylist()) == {0: 15, 1: 5}
    # the subsets' seed does not move the hold-out
    moved = prepare(tiny_model_dir, source=str(source), validation={"holdout": 0.1, "seed": 7}, subset_seed=1)
    assert set(origin(moved.eval)) == set(origin(first.eval))


def test_subsets_are_drawn_after_the_holdout(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "test": 40})
    full = prepare(tiny_model_dir, source=str(source))
    out = prepare(tiny_model_dir, source=str(source), train_size=40, eval_size=8)
    train, held = origin(out.train), origin(out.eval)
    assert len(train) == 40 and len(held) == 8 and not set(train) & set(held)
    assert set(held) <= set(origin(full.eval)) and set(train) <= set(origin(full.train))
    assert counts(quarter_label(i) for _, i in train) == {0: 30, 1: 10}
    assert counts(quarter_label(i) for _, i in held) == {0: 6, 1: 2}
    with pytest.raises(UserError, match=r"data.train_size 181 is larger than split 'train', which has 180 rows after "
                                        r"holding out 20 for validation \(data.validation.holdout\)"):
        prepare(tiny_model_dir, source=str(source), train_size=181)
    with pytest.raises(UserError, match=r"data.eval_size 21 is larger than split 'train \(held out\)', which has "
                                        r"20 rows"):
        prepare(tiny_model_dir, source=str(source), eval_size=21)


@pytest.mark.parametrize("holdout, left", [(199, 1), (0.995, 1), (200, 0)])
def test_a_too_large_holdout_is_refused(tmp_path, tiny_model_dir, holdout, left):
    source = write_splits(tmp_path / "data", {"train": 200, "test": 40})
    with pytest.raises(UserError) as err:
        prepare(tiny_model_dir, source=str(source), validation={"holdout": holdout})
    assert "data.validation.holdout" in str(err.value)
    assert f"leaves {left} of the 200 rows of split 'train'" in str(err.value)
    # the largest hold-out that leaves two rows to train on is accepted
    out = prepare(tiny_model_dir, source=str(source), validation={"holdout": 198})
    assert out.train.num_rows == 2 and out.eval.num_rows == 198


def test_holdout_settings_are_checked_by_the_config():
    with pytest.raises(ValueError, match="is a row count when >= 1 and must be a whole number"):
        DataConfig(validation={"holdout": 1.5})
    with pytest.raises(ValueError, match="greater than 0"):
        DataConfig(validation={"holdout": 0})


@pytest.mark.parametrize("given, refused", [
    ({"eval_split": "train"}, "eval_split 'train' is the train split"),
    ({"validation": {"split": "train"}}, "validation.split 'train' is the train split"),
    ({"train_split": "dev", "eval_split": "dev"}, "eval_split 'dev' is the train split"),
    ({"train_split": "test"}, "test_split 'test' is the train split"),
])
def test_no_split_selects_or_tests_on_the_rows_trials_train_on(given, refused):
    with pytest.raises(ValueError, match=refused):
        DataConfig(**given)
    # selecting on the test split stays possible (the IMDB recipe), and so does no test score
    assert DataConfig(eval_split="test").eval_split == "test"
    assert DataConfig(train_split="test", test_split=None).test_split is None


# --- which split selects ----------------------------------------------------------------------
def test_the_datas_validation_split_is_picked_when_present(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "validation": 30, "test": 40})
    out = prepare(tiny_model_dir, source=str(source))
    assert out.stats["selection"] == "the data's validation split"
    assert origin(out.eval) == [("validation", i) for i in range(30)]
    assert origin(out.train) == [("train", i) for i in range(200)]  # nothing held out
    assert origin(out.tables["test"]) == [("test", i) for i in range(40)]
    assert out.stats["eval"]["split"] == "validation" and out.stats["test"]["split"] == "test"
    # a validation split named as the test split is not selected on: it is held out of train
    out = prepare(tiny_model_dir, source=str(source), test_split="validation")
    assert out.stats["selection"] == "held out of the train split"
    assert {s for s, _ in origin(out.eval)} == {"train"} and out.eval.num_rows == 20
    assert origin(out.tables["test"]) == [("validation", i) for i in range(30)]
    assert out.stats["test"]["split"] == "validation"


def test_eval_split_test_reproduces_the_recipe(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "validation": 30, "test": 40})
    out = prepare(tiny_model_dir, source=str(source), eval_split="test")
    assert out.stats["selection"] == "data.eval_split"
    assert origin(out.eval) == [("test", i) for i in range(40)]
    assert origin(out.train) == [("train", i) for i in range(200)]
    assert set(out.tables) == {"train", "eval"} and "test" not in out.stats
    assert out.stats["eval"] == {"split": "test", "rows": 40, "label_counts": {0: 30, 1: 10}}


def test_an_explicit_validation_split(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "validation": 30, "dev": 24, "test": 40})
    out = prepare(tiny_model_dir, source=str(source), validation={"split": "dev"})
    assert out.stats["selection"] == "data.validation.split"
    assert origin(out.eval) == [("dev", i) for i in range(24)]
    assert origin(out.tables["test"]) == [("test", i) for i in range(40)]
    assert origin(out.train) == [("train", i) for i in range(200)]
    # selecting on the test split leaves no test role
    out = prepare(tiny_model_dir, source=str(source), validation={"split": "test"})
    assert origin(out.eval) == [("test", i) for i in range(40)] and set(out.tables) == {"train", "eval"}
    # data.eval_split wins over data.validation.split
    out = prepare(tiny_model_dir, source=str(source), eval_split="dev", validation={"split": "validation"})
    assert out.stats["selection"] == "data.eval_split" and origin(out.eval) == [("dev", i) for i in range(24)]
    with pytest.raises(UserError, match=r"no files for split\(s\) \['other'\]"):
        prepare(tiny_model_dir, source=str(source), validation={"split": "other"})


def test_the_test_role_is_there_only_when_the_data_has_the_split(tmp_path, tiny_model_dir, origin):
    no_test = write_splits(tmp_path / "no_test", {"train": 200, "validation": 30})
    out = prepare(tiny_model_dir, source=str(no_test))
    assert set(out.tables) == {"train", "eval"} and "test" not in out.stats
    assert origin(out.eval) == [("validation", i) for i in range(30)]
    with_test = write_splits(tmp_path / "with_test", {"train": 200, "test": 40, "heldout": 12})
    out = prepare(tiny_model_dir, source=str(with_test), test_split=None)
    assert set(out.tables) == {"train", "eval"} and "test" not in out.stats
    out = prepare(tiny_model_dir, source=str(with_test), test_split="heldout")
    assert origin(out.tables["test"]) == [("heldout", i) for i in range(12)]
    assert {s for s, _ in origin(out.eval)} == {"train"}
    # the train split alone: held out, and no test score
    only_train = write_splits(tmp_path / "only_train", {"train": 200})
    out = prepare(tiny_model_dir, source=str(only_train))
    assert set(out.tables) == {"train", "eval"} and out.eval.num_rows == 20 and out.train.num_rows == 180


def test_test_size_subsets_the_test_split(tmp_path, tiny_model_dir, origin):
    source = write_splits(tmp_path / "data", {"train": 200, "validation": 30, "test": 40})
    out = prepare(tiny_model_dir, source=str(source), test_size=20)
    test = origin(out.tables["test"])
    assert len(test) == len(set(test)) == 20 and {s for s, _ in test} == {"test"}
    assert counts(quarter_label(i) for _, i in test) == {0: 15, 1: 5}
    assert out.stats["test"]["rows"] == 20 and out.stats["test"]["label_counts"] == {0: 15, 1: 5}
    assert out.eval.num_rows == 30 and out.train.num_rows == 200  # the other roles are whole
    with pytest.raises(UserError, match=r"data.test_size 41 is larger than split 'test', which has 40 rows; "
                                        r"lower data.test_size"):
        prepare(tiny_model_dir, source=str(source), test_size=41)


# --- where the data comes from -----------------------------------------------------------------
@pytest.fixture
def fake_hub(monkeypatch):
    """``datasets.load_dataset`` as ``ftplat.data.sources`` calls it, answering from memory."""
    import datasets

    calls, answer = [], {}

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        if "error" in answer:
            raise answer["error"]
        return datasets.DatasetDict({
            split: datasets.Dataset.from_dict({"sentence": rows["text"], "label": rows["label"], "idx": list(range(n))})
            for split, n in answer["sizes"].items() for rows in [build_rows(split, n)]})

    monkeypatch.setattr("ftplat.data.sources.datasets.load_dataset", load_dataset)
    return calls, answer


def test_a_hub_sources_config_name_reaches_load_dataset(tiny_model_dir, origin, fake_hub):
    calls, answer = fake_hub
    answer["sizes"] = {"train": 120, "validation": 16, "test": 24}
    out = prepare(tiny_model_dir, source="nyu-mll/glue", config_name="sst2", text_column="sentence")
    assert calls == [(("nyu-mll/glue", "sst2"), {"revision": None})]
    assert out.stats["selection"] == "the data's validation split"
    assert origin(out.eval) == [("validation", i) for i in range(16)]
    assert origin(out.tables["test"]) == [("test", i) for i in range(24)]
    assert origin(out.train) == [("train", i) for i in range(120)]
    calls.clear()
    prepare(tiny_model_dir, source="stanfordnlp/sst2", text_column="sentence", eval_split="test")
    assert calls == [(("stanfordnlp/sst2", None), {"revision": None})]
    calls.clear()  # a dataset published as a loading script, read from the hub's parquet branch
    prepare(tiny_model_dir, source="eriktks/conll2003-like", text_column="sentence", eval_split="test",
            revision="refs/convert/parquet")
    assert calls == [(("eriktks/conll2003-like", None), {"revision": "refs/convert/parquet"})]


def test_hub_source_errors_name_the_setting(tiny_model_dir, fake_hub):
    calls, answer = fake_hub
    answer["error"] = ValueError("BuilderConfig 'sst3' not found. Available: ['sst2', 'mrpc']\nmore detail")
    with pytest.raises(UserError, match=r"data.source 'nyu-mll/glue' \(configuration 'sst3'\): BuilderConfig "
                                        r"'sst3' not found. Available: \['sst2', 'mrpc'\]; "
                                        r"set data.config_name to one it has"):
        prepare(tiny_model_dir, source="nyu-mll/glue", config_name="sst3", text_column="sentence")
    del answer["error"]
    answer["sizes"] = {"validation": 16, "test": 24}
    with pytest.raises(UserError, match=r"has no split\(s\) \['train'\]; it has \['validation', 'test'\]"):
        prepare(tiny_model_dir, source="nyu-mll/glue", config_name="sst2", text_column="sentence")
    answer["sizes"] = {"train": 120, "test": 24}
    with pytest.raises(UserError, match=r"data.text_column 'text' is not a column of split 'train'"):
        prepare(tiny_model_dir, source="nyu-mll/glue", config_name="sst2")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_local_csv_and_jsonl_folders(tmp_path, tiny_model_dir, origin, fmt):
    source = write_splits(tmp_path / fmt, {"train": 200, "validation": 30, "test": 40}, fmt=fmt)
    out = prepare(tiny_model_dir, source=str(source))
    assert origin(out.train) == [("train", i) for i in range(200)]
    assert origin(out.eval) == [("validation", i) for i in range(30)]
    assert origin(out.tables["test"]) == [("test", i) for i in range(40)]
    # without a validation file: the hold-out
    (source / f"validation.{fmt}").unlink()
    out = prepare(tiny_model_dir, source=str(source))
    assert out.stats["selection"] == "held out of the train split"
    assert sorted(origin(out.train) + origin(out.eval)) == [("train", i) for i in range(200)]
    assert counts(out.eval["labels"].to_pylist()) == {0: 15, 1: 5}
