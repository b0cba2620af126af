"""causal-lm with several prompt columns (Dolly's instruction and context): each row's prompt
is its non-empty values a blank line apart, so an instruction about a passage is trained with
the passage. The shipped Dolly recipe read the instruction alone."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from tiny_assets import write_tiny_llama

from ftplat.checkpoints.card import build_column_lines
from ftplat.config.schema import JobConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.tasks import build_task
from ftplat.tasks.base import IGNORED_LABEL

ROWS = {"instruction": ["what color is the sky according to the text ?", "name a color"],
        "context": ["the sky is green", ""],
        "response": ["green", "red"]}


def job_of(tmp_path, **data) -> JobConfig:
    pq.write_table(pa.table({**ROWS}), tmp_path / "train.parquet")
    pq.write_table(pa.table({**ROWS}), tmp_path / "validation.parquet")
    model = write_tiny_llama(tmp_path / "llama")
    return JobConfig.model_validate({
        "task": {"type": "causal-lm"}, "model": {"name_or_path": str(model)},
        "data": {"source": str(tmp_path), "completion_column": "response", "max_length": 64, "test_split": None,
                 **data}})


def test_the_prompt_joins_the_rows_non_empty_columns(tmp_path):
    job = job_of(tmp_path, prompt_column=["instruction", "context"])
    task = build_task(job)
    assert task.read_columns(job.data) == {"prompt_column[0]": "instruction", "prompt_column[1]": "context",
                                           "completion_column": "response"}
    inputs = task.build_inputs(pa.table(ROWS), job.data)
    assert inputs["prompt"] == ["what color is the sky according to the text ?\n\nthe sky is green", "name a color"]
    table = build_tokenized_tables(job).tables["train"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(job.model.name_or_path)
    row = table.slice(0, 1).to_pylist()[0]
    prompt_ids = [i for i, label in zip(row["input_ids"], row["labels"]) if label == IGNORED_LABEL]
    assert "sky is green" in tokenizer.decode(prompt_ids)  # the passage is in what the model reads
    assert build_column_lines(task, job.data.model_dump()) == [
        "prompt `instruction`", "prompt `context`", "completion `response`"]


@pytest.mark.parametrize("prompt, message", [
    ([], "prompt_column is an empty list"),
    (["instruction", "instruction"], r"prompt_column names \['instruction'\] more than once"),
    (["instruction", "response"], "prompt_column and completion_column both name column 'response'"),
])
def test_bad_prompt_column_lists_are_refused(tmp_path, prompt, message):
    with pytest.raises(ValueError, match=message):
        job_of(tmp_path, prompt_column=prompt)


def test_the_shipped_dolly_recipe_reads_the_context():
    from pathlib import Path

    recipe = yaml.safe_load((Path(__file__).resolve().parents[2] / "jobs/configs/causal_lm_dolly.yaml").read_text())
    assert recipe["data"]["prompt_column"] == ["instruction", "context"]


def test_a_listed_column_of_non_text_values_is_refused_naming_it(tmp_path):
    from ftplat.errors import UserError

    job = job_of(tmp_path, prompt_column=["instruction", "response"], completion_column="context")
    with pytest.raises(UserError, match=r"^data\.prompt_column\[1\] 'id' of split 'train' holds non-text values "
                                        r"\(row 0: int 7\)"):
        build_task(job).build_inputs(pa.table({**ROWS, "id": [7, 8]}), job.data.model_copy(
            update={"prompt_column": ["instruction", "id"]}), "train")
