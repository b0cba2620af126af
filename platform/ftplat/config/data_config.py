"""The ``data`` section: where a task's examples come from, and which split selects trials."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ftplat.config.base import StrictModel


class ValidationConfig(StrictModel):
    """The split trials are selected on. The test split is kept out of selection and scores
    the winner once, after the sweep."""

    split: str | None = None
    """A split of data.source to select on. null: its ``validation`` split when it has one,
    else ``holdout`` of the train split (stratified by label for classification)."""
    holdout: float = Field(default=0.1, gt=0)
    """Held out of train when there is no validation split: below 1 a fraction, 1 or more a
    number of rows."""
    seed: int = 42
    """Seed of the hold-out draw, and of masked-lm's evaluation masks (the same for every trial)."""

    @field_validator("holdout")
    @classmethod
    def _whole_rows(cls, value):
        if value >= 1 and value != int(value):
            raise ValueError(f"is a row count when >= 1 and must be a whole number, got {value}")
        return value


class DataConfig(StrictModel):
    """Where the task's data comes from, which columns it reads and how much of it is used."""

    source: str = "stanfordnlp/imdb"
    """Hub id, a local directory of parquet/CSV/TSV/JSON(L) files named after their splits
    (``train.parquet``, ``test-00000-of-00001.parquet``, ``dev.tsv``, ``train.jsonl.gz``...; CSV, TSV and JSON may be
    gzip/bz2/xz-compressed), an ``aclImdb/`` folder, or a ``DatasetDict.save_to_disk`` folder."""
    config_name: str | None = None
    """The hub dataset's configuration (``glue`` with ``mrpc``)."""
    revision: str | None = None
    """The hub dataset's revision: a branch, tag or commit. ``refs/convert/parquet`` reads the
    parquet files the hub made of a dataset published as a loading script, which the installed
    ``datasets`` no longer runs."""
    train_split: str = "train"
    """Split to train on."""
    validation: ValidationConfig = ValidationConfig()
    """How the selection split is found (see ValidationConfig); used unless eval_split is set."""
    eval_split: str | None = None
    """Select trials on this split instead of the validation protocol. ``test`` reproduces
    the IMDB recipe, which selects on the test split (its test score is then not held out)."""
    test_split: str | None = "test"
    """Split the winner's best checkpoint is scored on once after the sweep (skipped when the
    data has no such split); null: no test score."""
    text_column: str = "text"
    """Column holding the text (sentence-level tasks; the raw text of masked-lm and causal-lm)."""
    text_pair_column: str | None = None
    """Column holding the second text of a pair (sentence-pair tasks: NLI, paraphrase)."""
    tokens_column: str = "tokens"
    """Column holding each example's words (token-classification)."""
    label_column: str = "label"
    """Column holding the labels: class ids or names (text-classification), a float
    (regression), a list of classes (multi-label), a list of tags per word (token-classification)."""
    label_columns: list[str] | None = None
    """multi-label-classification: several 0/1 columns, one per label, instead of label_column."""
    prompt_column: str | list[str] | None = None
    """causal-lm: column holding each example's prompt (given with completion_column instead of
    text_column); the loss is taken on the completion only. A list of columns makes one prompt
    of each row's non-empty values, a blank line apart (Dolly: [instruction, context])."""
    completion_column: str | None = None
    """causal-lm: column holding the completion the model learns to write after the prompt."""
    max_length: int = Field(default=160, ge=8)
    """Tokens per example; longer texts are truncated. masked-lm (unless task.line_by_line) and
    causal-lm with task.packing: the length of the blocks the concatenated texts are cut into.
    At most what the model reads (its tokenizer's model_max_length, else its learned positions);
    checked when the tokenizer loads."""
    pad_to_max_length: bool = False
    """Pad every example to max_length (the recipe) instead of per batch (faster)."""
    train_size: int | None = Field(default=None, ge=2)
    """Stratified subset of the train split (after any hold-out); ``None`` uses all of it."""
    eval_size: int | None = Field(default=None, ge=2)
    """Stratified subset of the selection split; ``None`` uses all of it."""
    test_size: int | None = Field(default=None, ge=2)
    """Stratified subset of the test split; ``None`` uses all of it."""
    subset_seed: int = 42
    """Seed of the stratified subsets."""
    empty_texts: Literal["error", "drop"] = "error"
    """Rows whose text is empty, whitespace-only (zero-width and other invisible format
    characters count as space) or missing: ``error`` refuses the data and names the split and
    the count; ``drop`` leaves them out (the count is logged) before the subsets are drawn."""

    @model_validator(mode="after")
    def _prompt_with_completion(self):
        if (self.prompt_column is None) != (self.completion_column is None):
            given, missing = (("prompt_column", "completion_column") if self.completion_column is None
                              else ("completion_column", "prompt_column"))
            raise ValueError(f"{given} is set but {missing} is not; give both (a prompt/completion pair per row) "
                             "or neither (text_column)")
        prompts = [self.prompt_column] if isinstance(self.prompt_column, str) else self.prompt_column or []
        if isinstance(self.prompt_column, list) and not prompts:
            raise ValueError("prompt_column is an empty list; name the prompt's column (or columns)")
        twice = sorted({c for c in prompts if prompts.count(c) > 1})
        if twice:
            raise ValueError(f"prompt_column names {twice} more than once; name each column once")
        if self.completion_column in prompts:
            raise ValueError(f"prompt_column and completion_column both name column {self.completion_column!r}; "
                             "the prompt and the completion are two columns")
        return self

    @model_validator(mode="after")
    def _roles_apart_from_train(self):
        # Selecting on the rows a trial trained on ranks trials by how well they memorise, and
        # a test score on them says nothing of new data; both would pass unnoticed.
        for field, split in (("eval_split", self.eval_split), ("validation.split", self.validation.split)):
            if split is not None and split == self.train_split:
                raise ValueError(f"{field} {split!r} is the train split (train_split): trials would be selected "
                                 "on rows they trained on; leave it null to hold out validation.holdout of the "
                                 "train split, or name another split")
        if self.test_split is not None and self.test_split == self.train_split:
            raise ValueError(f"test_split {self.test_split!r} is the train split (train_split): the winner would be "
                             "scored on rows it trained on; name another split, or null for no test score")
        return self

    @field_validator("label_columns")
    @classmethod
    def _two_or_more(cls, value):
        if value is not None and len(value) < 2:
            raise ValueError("needs at least two 0/1 columns (one per label); a single column is label_column")
        return value
