"""token-classification (CoNLL-style NER): config checks, tags, sub-word alignment, the model,
seqeval metrics and serving, on a tiny BERT and WordPiece vocabulary built here (no Ray, no hub)."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch

from ftplat.config.data_config import DataConfig
from ftplat.config.schema import JobConfig, ModelConfig
from ftplat.errors import UserError
from ftplat.tasks import build_task
from ftplat.tasks.base import IGNORED_LABEL, Examples
from ftplat.tasks.token_classification import TokenClassification

ID2LABEL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
O, B_PER, I_PER, B_LOC, I_LOC = range(5)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "lives", "in", "paris", "wash", "##ing",
         "##ton", "mary"]
X = IGNORED_LABEL
MODEL = ModelConfig(id2label=ID2LABEL, num_labels=len(ID2LABEL))
DATA = DataConfig(label_column="ner_tags")


def make_job(model=None, data=None, **sections) -> JobConfig:
    return JobConfig.model_validate({"task": {"type": "token-classification"},
                                     "model": {"id2label": ID2LABEL, **(model or {})},
                                     "data": {"label_column": "ner_tags", **(data or {})}, **sections})


def make_task(bound: bool = True) -> TokenClassification:
    task = build_task("token-classification")
    return task.bind_model(MODEL) if bound else task


def tag_rows(*rows: list[int]) -> np.ndarray:
    """Labels as build_labels makes them: one list per row in a 1-D object array."""
    labels = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        labels[i] = list(row)
    return labels


def make_ds(tokens, tags, tag_feature=None) -> datasets.Dataset:
    features = None
    if tag_feature is not None:
        features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                      "ner_tags": datasets.Sequence(tag_feature)})
    return datasets.Dataset.from_dict({"tokens": tokens, "ner_tags": tags}, features=features)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import BertTokenizerFast

    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizerFast(vocab=str(vocab))
    assert tok.is_fast and tok.tokenize("Washington") == ["wash", "##ing", "##ton"]
    return tok


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    """A saved tiny BERT tagger whose head predicts I-PER everywhere (zero weights, bias)."""
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64, num_labels=len(ID2LABEL),
                        id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()})
    torch.manual_seed(0)
    model = BertForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 0.0, 5.0, 0.0, 0.0]))
    path = tmp_path_factory.mktemp("tiny-ner")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# --- configuration -------------------------------------------------------------------------
def test_job_defaults_come_from_id2label_and_the_task():
    job = make_job()
    assert isinstance(build_task(job.task), TokenClassification)
    assert job.model.num_labels == 5
    assert job.training.metric_for_best_model == "eval_f1" and job.training.greater_is_better is True
    assert make_task().read_columns(job.data) == {"tokens_column": "tokens", "label_column": "ner_tags"}


@pytest.mark.parametrize("model, data, expected", [
    ({"id2label": None}, {}, r"model\.id2label is required .*B-PER"),
    ({"num_labels": 3}, {}, r"id2label keys must be 0\.\.2"),
    ({"id2label": {0: "O", 1: "PER"}}, {}, r"model\.id2label names tag 'PER', which is not an IOB tag"),
    ({"id2label": {0: "LABEL_0", 1: "LABEL_1"}}, {}, r"model\.id2label names tag 'LABEL_0'"),
    ({"id2label": {0: "O", 1: "B-PER", 2: "B-PER"}}, {}, r"model\.id2label names tags \['B-PER'\] more than once"),
    ({"id2label": {0: "B-PER"}}, {}, r"model\.id2label names 1 tag; .* at least 2"),
    ({}, {"label_columns": ["a", "b"]}, r"data\.label_columns .* remove data\.label_columns"),
    ({}, {"text_pair_column": "other"}, r"data\.text_pair_column .* remove it"),
])
def test_job_refusals_name_the_field_and_the_fix(model, data, expected):
    with pytest.raises(ValueError, match=expected):
        make_job(model=model, data=data)


def test_other_tag_schemes_seqeval_reads_are_accepted():
    assert make_job(model={"id2label": {0: "O", 1: "S-PER", 2: "B-PER", 3: "I-PER", 4: "E-PER"}}).model.num_labels == 5
    assert make_job(model={"id2label": {0: "O", 1: "I-PER"}}).model.num_labels == 2


# --- inputs and labels ---------------------------------------------------------------------
def test_build_inputs_reads_word_lists_and_names_bad_rows():
    data = DATA
    task = make_task()
    ds = make_ds([["John", "lives"], [], None], [[B_PER, O], [], None])
    assert task.build_inputs(ds, data) == {"tokens": [["John", "lives"], [], None]}
    texts = datasets.Dataset.from_dict({"tokens": ["John lives", "x"], "ner_tags": [[1], [0]]})
    with pytest.raises(UserError, match=r"data\.tokens_column 'tokens' of split 'validation' row 0 is str"):
        task.build_inputs(texts, data, split="validation")
    numbers = {"tokens": [["a"], ["b", 2]], "ner_tags": [[0], [0, 0]]}  # Arrow cannot mix them; pandas can
    with pytest.raises(UserError, match=r"data\.tokens_column 'tokens' of split '\?' row 1 holds int 2"):
        task.build_inputs(numbers, data)


def test_build_labels_from_ids_is_one_list_per_row_even_when_rows_have_equal_lengths():
    data = DATA
    labels = make_task(bound=False).build_labels(make_ds([["John", "Smith"], ["in", "Paris"]],
                                                         [[B_PER, I_PER], [O, B_LOC]]),
                                                 data, MODEL, "train")
    assert labels.dtype == object and labels.shape == (2,)
    assert labels.tolist() == [[B_PER, I_PER], [O, B_LOC]]
    assert all(type(t) is int for row in labels for t in row)
    assert Examples({"tokens": [["John", "Smith"], ["in", "Paris"]]}, labels).select(np.array([1])).labels.tolist() \
        == [[O, B_LOC]]


def test_build_labels_from_tag_names():
    labels = make_task().build_labels(make_ds([["Mary", "lives", "in", "Paris"]], [["B-PER", "O", "O", "B-LOC"]]),
                                      DATA, MODEL, "train")
    assert labels.tolist() == [[B_PER, O, O, B_LOC]]


def test_build_labels_maps_a_classlabel_sequence_in_its_own_order():
    names = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]  # not model.id2label's order
    ds = make_ds([["John", "Smith", "in", "Paris"]], [[3, 4, 0, 1]], datasets.ClassLabel(names=names))
    labels = make_task().build_labels(ds, DATA, MODEL, "train")
    assert labels.tolist() == [[B_PER, I_PER, O, B_LOC]]
    other = make_ds([["John"]], [[1]], datasets.ClassLabel(names=["O", "B-MISC", "I-MISC", "B-PER", "I-PER"]))
    with pytest.raises(UserError, match=r"ClassLabel with names .*B-MISC.* set model\.id2label to"):
        make_task().build_labels(other, DATA, MODEL, "train")


@pytest.mark.parametrize("tokens, tags, expected", [
    ([["John", "lives"], ["Paris"]], [[B_PER, O], [B_LOC, O]],
     r"data\.label_column 'ner_tags' of split 'train' row 1 has 2 tags but data\.tokens_column 'tokens' has 1 words"),
    ([["John"]], [[7]], r"data\.label_column 'ner_tags' of split 'train' has label 7 outside 0\.\.4"),
    ([["John"]], [["B-ORG"]], r"data\.label_column 'ner_tags' of split 'train' holds labels \['B-ORG'\]"),
    ([["John"]], ["B-PER"], r"row 0 is str 'B-PER', not a list of tags"),
])
def test_build_labels_refuses_bad_tags_naming_the_columns(tokens, tags, expected):
    with pytest.raises(UserError, match=expected):
        make_task().build_labels(make_ds(tokens, tags), DATA, MODEL, "train")


def test_label_stats_count_tags_by_name_and_entities():
    task = make_task()
    labels = task.build_labels(make_ds([["John", "Smith", "in", "Paris"], ["Mary", "Paris"]],
                                       [[B_PER, I_PER, O, B_LOC], [B_PER, B_LOC]]),
                               DATA, MODEL, "train")
    stats = task.build_label_stats(labels)
    assert stats == {"label_counts": {"O": 1, "B-PER": 2, "I-PER": 1, "B-LOC": 2}, "entity_count": 4}
    json.dumps(stats)
    assert make_task(bound=False).build_label_stats(labels) == {"label_counts": {0: 1, 1: 2, 2: 1, 3: 2}}
    assert task.build_stratify_key(labels) is None


# --- tokenization and the model ------------------------------------------------------------
def test_tokenize_labels_the_first_subtoken_of_each_word_only(tokenizer):
    import pyarrow as pa

    task = make_task()
    examples = Examples({"tokens": [["John", "Washington", "lives"], ["Paris"]]},
                        tag_rows([B_PER, B_LOC, O], [B_LOC]))
    columns = task.tokenize(tokenizer, examples, DATA)
    assert tokenizer.convert_ids_to_tokens(columns["input_ids"][0]) == \
        ["[CLS]", "john", "wash", "##ing", "##ton", "lives", "[SEP]"]
    assert columns["labels"][0] == [X, B_PER, B_LOC, X, X, O, X]
    assert columns["labels"][1] == [X, B_LOC, X]
    assert set(columns) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert pa.table(columns).num_rows == 2


def test_tokenize_pads_and_truncates_with_ignored_labels(tokenizer):
    task = make_task()
    words = ["John", "Washington", "lives", "in", "Paris", "Mary", "Smith"]
    examples = Examples({"tokens": [words, ["Paris"]]},
                        tag_rows([B_PER, B_LOC, O, O, B_LOC, B_PER, I_PER], [B_LOC]))
    columns = task.tokenize(tokenizer, examples, DataConfig(label_column="ner_tags", max_length=8,
                                                            pad_to_max_length=True))
    # [CLS] john wash ##ing ##ton lives in [SEP]: paris, mary, smith are cut off
    assert columns["labels"][0] == [X, B_PER, B_LOC, X, X, O, O, X]
    assert columns["labels"][1] == [X, B_LOC, X, X, X, X, X, X]
    assert columns["attention_mask"][1] == [1, 1, 1, 0, 0, 0, 0, 0]


def test_words_data_max_length_cuts_off_are_counted_and_warned_about(tokenizer, caplog):
    """Their entities were neither found nor missed: F1 described the first max_length tokens
    of each row, silently."""
    import logging

    from ftplat.data.compact import build_compact_table

    task = make_task()
    words = ["John", "Washington", "lives", "in", "Paris", "Mary", "Smith"]
    examples = Examples({"tokens": [words, ["Paris"]]},
                        tag_rows([B_PER, B_LOC, O, O, B_LOC, B_PER, I_PER], [B_LOC]))
    data = DataConfig(label_column="ner_tags", max_length=8)
    table = build_compact_table(task.tokenize(tokenizer, examples, data))
    with caplog.at_level(logging.WARNING):
        counts = task.run_table_checks(tokenizer, examples, table, "eval", data)
    # paris, mary, smith are cut: two entities (Paris, Mary Smith)
    assert counts == {"rows_cut": 1, "words_cut": 3, "entities_cut": 2}
    assert ("data.max_length 8 cuts 1 of the eval split's 2 rows: 3 words and 2 entities past it are not scored"
            in caplog.text)
    wide = DataConfig(label_column="ner_tags", max_length=32)
    assert task.run_table_checks(tokenizer, examples, build_compact_table(task.tokenize(tokenizer, examples, wide)),
                                 "eval", wide) == {}
    # A word that makes no token (an empty string, a zero-width space) is not cut by max_length
    # when a later word is reached; the count follows the words the encoding reached.
    sparse = Examples({"tokens": [["John", "", "lives", "\u200b", "in", "Washington", "Paris"]]},
                      tag_rows([B_PER, O, O, O, O, B_LOC, B_LOC]))
    for padded in (False, True):
        # [CLS] john lives in wash ##ing ##ton [SEP]: only paris is cut
        tight = DataConfig(label_column="ner_tags", max_length=8, pad_to_max_length=padded)
        table = build_compact_table(task.tokenize(tokenizer, sparse, tight))
        assert task.run_table_checks(tokenizer, sparse, table, "train", tight) == {
            "rows_cut": 1, "words_cut": 1, "entities_cut": 1}
        roomy = DataConfig(label_column="ner_tags", max_length=9, pad_to_max_length=padded)
        table = build_compact_table(task.tokenize(tokenizer, sparse, roomy))
        assert task.run_table_checks(tokenizer, sparse, table, "train", roomy) == {}


def test_tokenize_refuses_a_slow_tokenizer_naming_the_model(tmp_path):
    from transformers import BertJapaneseTokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    slow = BertJapaneseTokenizer(vocab_file=str(tmp_path / "vocab.txt"), word_tokenizer_type="basic",
                                 subword_tokenizer_type="wordpiece", name_or_path="some/slow-model")
    assert not slow.is_fast
    examples = Examples({"tokens": [["John"]]}, tag_rows([B_PER]))
    with pytest.raises(UserError, match=r"model\.name_or_path 'some/slow-model' has a slow \(Python\) tokenizer"):
        make_task().tokenize(slow, examples, DataConfig())


def test_collator_and_model_train_on_the_aligned_labels(tokenizer, model_dir):
    job = make_job(model={"name_or_path": str(model_dir)})
    task = build_task(job.task)
    model = task.build_model(job.model)
    assert task.id2label == ID2LABEL  # the metrics of this instance know the tag names
    assert type(model).__name__ == "BertForTokenClassification" and model.config.id2label == ID2LABEL
    examples = Examples({"tokens": [["John", "Washington", "lives"], ["Paris"]]},
                        tag_rows([B_PER, B_LOC, O], [B_LOC]))
    columns = task.tokenize(tokenizer, examples, job.data)
    rows = [{k: v[i] for k, v in columns.items()} for i in range(2)]
    batch = task.build_collator(tokenizer)(rows)
    assert batch["labels"].tolist() == [[X, B_PER, B_LOC, X, X, O, X], [X, B_LOC, X, X, X, X, X]]
    assert batch["attention_mask"][1].tolist() == [1, 1, 1, 0, 0, 0, 0]
    out = model(**batch)
    assert out.logits.shape == (2, 7, 5)
    assert torch.isfinite(out.loss) and out.loss.item() > 0
    out.loss.backward()
    assert model.classifier.weight.grad is not None


# --- metrics -------------------------------------------------------------------------------
def logits_for(pred_ids: list[list[int]], k: int = 5) -> np.ndarray:
    logits = np.zeros((len(pred_ids), len(pred_ids[0]), k), dtype=np.float32)
    for i, row in enumerate(pred_ids):
        for j, tag in enumerate(row):
            logits[i, j, tag] = 3.0
    return logits


def compute(task, pred_ids, label_ids):
    from transformers import EvalPrediction

    return task.compute_metrics(EvalPrediction(predictions=logits_for(pred_ids), label_ids=np.array(label_ids)))


def test_metrics_are_entity_level_and_skip_ignored_positions():
    # Words: John Smith in Paris -> PER(John Smith), LOC(Paris). The model finds the person
    # and misses Paris; at ignored positions (special tokens, "##ton") it says B-LOC, which
    # would add false locations if they were scored.
    labels = [[X, B_PER, I_PER, X, O, B_LOC, X]]
    preds = [[B_LOC, B_PER, I_PER, B_LOC, O, O, B_LOC]]
    result = compute(make_task(), preds, labels)
    assert result["precision"] == 1.0  # 1 entity predicted, correct
    assert result["recall"] == 0.5  # 1 of 2 entities found
    assert result["f1"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert result["accuracy"] == 0.75  # 3 of 4 labelled words
    assert set(result) == {"precision", "recall", "f1", "accuracy"}


def test_metrics_need_the_whole_entity_and_sum_over_rows():
    # Row 1: PER(John Smith) predicted as PER(John) only -> wrong entity, 2 of 3 tokens right.
    # Row 2 (padded with X like the Trainer pads batches): LOC(Paris) found, plus a false PER(Mary).
    labels = [[X, B_PER, I_PER, O, X], [X, B_LOC, O, X, X]]
    preds = [[O, B_PER, O, O, O], [O, B_LOC, B_PER, O, O]]
    result = compute(make_task(), preds, labels)
    # true: PER(r1 0-1), LOC(r2 0); predicted: PER(r1 0), LOC(r2 0), PER(r2 1) -> 1 correct
    assert result["precision"] == pytest.approx(1 / 3)
    assert result["recall"] == pytest.approx(1 / 2)
    assert result["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert result["accuracy"] == pytest.approx(3 / 5)  # wrong: I-PER of Smith, O of the second row


def test_metrics_without_entities_are_zero_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compute(make_task(), [[O, O, O]], [[X, O, O]])
    assert result == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 1.0}


def test_metrics_accept_predicted_ids_and_need_the_tag_names():
    task = make_task()
    assert task.compute_task_metrics(np.array([[B_PER, I_PER]]), np.array([[B_PER, I_PER]]))["f1"] == 1.0
    with pytest.raises(RuntimeError, match="need the tag names"):
        compute(make_task(bound=False), [[O]], [[O]])


# --- serving -------------------------------------------------------------------------------
def test_pipeline_output_is_formatted_as_entities(model_dir):
    from transformers import pipeline

    task = make_task()
    pipe = pipeline(task.pipeline_task, model=str(model_dir), **task.build_pipeline_kwargs())
    texts = ["John lives in Paris", "Mary"]
    results = pipe(texts, **task.build_predict_call_kwargs())
    predictions = [task.format_prediction(r) for r in results]
    # The head says I-PER for every token: one PER entity spanning each whole text.
    for text, prediction in zip(texts, predictions):
        assert list(prediction) == ["entities"] and len(prediction["entities"]) == 1
        entity = prediction["entities"][0]
        assert set(entity) == {"entity", "word", "start", "end", "score"}
        assert entity["entity"] == "PER" and entity["word"] == text.lower()
        assert (entity["start"], entity["end"]) == (0, len(text))
        assert type(entity["score"]) is float and 0.5 < entity["score"] <= 1.0
        assert entity["score"] == round(entity["score"], 6)
    json.dumps(predictions)
    assert task.format_prediction_line(predictions[0]) == "PER:john lives in paris"


def test_prediction_line_lists_entities_or_a_dash():
    task = make_task()
    raw = [{"entity_group": "PER", "word": "John Smith", "start": 0, "end": 10, "score": np.float32(0.91234567)},
           {"entity_group": "LOC", "word": "Paris", "start": 20, "end": 25, "score": np.float32(0.5)}]
    prediction = task.format_prediction(raw)
    assert prediction["entities"][0] == {"entity": "PER", "word": "John Smith", "start": 0, "end": 10,
                                         "score": 0.912346}
    assert task.format_prediction_line(prediction) == "PER:John Smith, LOC:Paris"
    assert task.format_prediction_line(task.format_prediction([])) == "-"
    assert task.build_predict_call_kwargs() == {}


def test_usage_example_is_python_that_names_the_pipeline():
    lines = make_task().build_usage_example()
    compile("\n".join(lines), "<model card>", "exec")
    assert 'pipeline("token-classification"' in "\n".join(lines) and "aggregation_strategy" in "\n".join(lines)


def test_the_task_built_from_a_job_knows_the_tag_names():
    """The worker builds its task with build_task(job): its metrics need no other call."""
    task = build_task(make_job())
    logits = np.full((1, 4, len(ID2LABEL)), -5.0)
    gold = [1, 2, 0, 0]  # B-PER I-PER O O
    for position, tag in enumerate(gold):
        logits[0, position, tag] = 5.0
    metrics = task.compute_metrics(SimpleNamespace(predictions=logits, label_ids=np.asarray([gold])))
    assert metrics["f1"] == 1.0 and metrics["accuracy"] == 1.0


def test_a_word_without_a_tag_is_named_by_its_row():
    """The flattened tags have no rows: a missing tag was reported at its position among all
    tags ("row 3 (1 of 4 rows)")."""
    task = make_task()
    job = make_job()
    ds = datasets.Dataset.from_dict({"tokens": [["john", "lives"], ["in", "paris"]], "ner_tags": [[1, 0], [0, None]]})
    with pytest.raises(UserError, match=r"data.label_column 'ner_tags' of split 'train' row 1 has no tag for word 1"):
        task.build_labels(ds, job.data, job.model, "train")
