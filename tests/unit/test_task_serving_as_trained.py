"""Serving reads an input as training did, on tiny models and tokenizers built here (no hub):
token-classification tags each word by its first sub-token and encodes a byte-level BPE word
with its leading space, and no task reads more tokens than the job's ``data.max_length``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ftplat.checkpoints.task_file import build_task_settings
from ftplat.tasks import TASK_FILE, build_task, build_task_for_model_dir
from ftplat.tasks.base import IGNORED_LABEL, Examples

X = IGNORED_LABEL
ID2LABEL = {0: "O", 1: "B-LOC", 2: "I-LOC"}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "lives", "in", "wash", "##ing", "##ton", "the",
         "movie", "was", "long"]
#: BERT's limit: what serving truncated at before it read the job's data.max_length.
MODEL_MAX_LENGTH = 512
#: Each task's head: num_labels and problem_type of the model config.
HEADS = {"text-classification": (2, None), "regression": (1, "regression"),
         "multi-label-classification": (2, "multi_label_classification"), "token-classification": (3, None),
         "masked-lm": (None, None)}


def tag_rows(*rows: list[int]) -> np.ndarray:
    labels = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        labels[i] = list(row)
    return labels


def write_model_dir(root: Path, settings: dict) -> str:
    """A 1-layer, 32-wide BERT with the task's head, a WordPiece tokenizer of ``VOCAB`` and
    ``ftplat_task.json`` holding ``settings``, as an export writes them."""
    import transformers
    from transformers import BertConfig, BertTokenizerFast

    root.mkdir(parents=True)
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizerFast(str(root / "vocab.txt"), model_max_length=MODEL_MAX_LENGTH).save_pretrained(root)
    task = build_task(settings)
    num_labels, problem_type = HEADS[task.name]
    labels = {"num_labels": num_labels, "problem_type": problem_type} if num_labels else {}
    if task.name == "token-classification":
        labels.update(id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()})
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=MODEL_MAX_LENGTH, **labels)
    torch.manual_seed(0)
    getattr(transformers, task.auto_model).from_config(config).save_pretrained(root)
    (root / TASK_FILE).write_text(json.dumps(settings))
    return str(root)


# --- token-classification: a word is tagged by its first sub-token ---------------------------
def test_ner_predict_tags_each_word_by_the_first_sub_token_training_labels(tmp_path):
    model_dir = write_model_dir(tmp_path / "ner", {"type": "token-classification"})
    task = build_task_for_model_dir(model_dir)
    pipe = task.build_pipeline(model_dir)
    tokenizer = pipe.tokenizer
    data = SimpleNamespace(max_length=16, pad_to_max_length=False)
    words = ["john", "lives", "in", "washington"]
    trained = task.tokenize(tokenizer, Examples({"tokens": [words]}, tag_rows([0, 0, 0, 1])), data)
    assert tokenizer.convert_ids_to_tokens(trained["input_ids"][0])[4:7] == ["wash", "##ing", "##ton"]
    assert trained["labels"][0] == [X, 0, 0, 0, 1, X, X, X]  # only "wash" is trained on

    def forward(input_ids=None, **_):
        """A model that learned what training labels: B-LOC on "wash"; "##ing" and "##ton" were
        never trained and come out O."""
        logits = torch.full((*input_ids.shape, len(ID2LABEL)), -5.0)
        for i, row in enumerate(input_ids.tolist()):
            for j, token in enumerate(tokenizer.convert_ids_to_tokens(row)):
                logits[i, j, 1 if token == "wash" else 0] = 5.0
        from transformers.modeling_outputs import TokenClassifierOutput

        return TokenClassifierOutput(logits=logits)

    pipe.model.forward = forward
    [prediction] = task.run_predict(pipe, [" ".join(words)])
    found = [(e["entity"], e["word"], e["start"], e["end"]) for e in prediction["entities"]]
    assert found == [("LOC", "washington", 14, 24)]
    usage = "\n".join(task.build_usage_example())
    assert 'aggregation_strategy="first"' in usage and "simple" not in usage


def test_ner_predict_tags_a_text_longer_than_max_length_in_overlapping_windows(tmp_path):
    """Training saw 16 tokens at a time; a 60-token text is tagged in windows of 16 that share
    a quarter, and every entity in it is found once, at its own characters (the first window
    alone held two of the ten)."""
    model_dir = write_model_dir(tmp_path / "ner", {"type": "token-classification", "max_length": 16})
    task = build_task_for_model_dir(model_dir)
    pipe = task.build_pipeline(model_dir)
    tokenizer = pipe.tokenizer

    def forward(input_ids=None, **_):
        logits = torch.full((*input_ids.shape, len(ID2LABEL)), -5.0)
        for i, row in enumerate(input_ids.tolist()):
            assert len(row) <= 16  # no window is longer than training's
            for j, token in enumerate(tokenizer.convert_ids_to_tokens(row)):
                logits[i, j, 1 if token == "wash" else 0] = 5.0
        from transformers.modeling_outputs import TokenClassifierOutput

        return TokenClassifierOutput(logits=logits)

    pipe.model.forward = forward
    text = " ".join(["john lives in washington"] * 10)
    [prediction] = task.run_predict(pipe, [text])
    found = [(e["entity"], e["word"], e["start"], e["end"]) for e in prediction["entities"]]
    starts = [i for i in range(len(text)) if text.startswith("washington", i)]
    assert found == [("LOC", "washington", s, s + len("washington")) for s in starts]
    assert "stride=4" in "\n".join(task.build_usage_example())


# --- token-classification: byte-level BPE words keep their leading space ---------------------
def write_byte_level_tokenizer(root: Path, roberta: bool) -> str:
    """A byte-level BPE tokenizer trained here, without add_prefix_space (as roberta-base,
    GPT-2 and Longformer ship): as RoBERTa's class, or as a plain tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, RobertaTokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    corpus = ["John Smith lives in Paris", "Mary met John Smith in Washington"] * 10
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if roberta:
        model = json.loads(tok.to_str())["model"]
        fast = RobertaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]])
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(root)
    return str(root)


@pytest.mark.parametrize("roberta", [True, False], ids=["RobertaTokenizer", "tokenizer.json"])
def test_byte_level_words_are_encoded_in_training_as_predict_encodes_raw_text(tmp_path, roberta):
    from transformers import AutoTokenizer, BertConfig, BertForTokenClassification

    task = build_task({"type": "token-classification", "id2label": ID2LABEL})
    tokenizer = task.prepare_tokenizer(AutoTokenizer.from_pretrained(write_byte_level_tokenizer(tmp_path / "base",
                                                                                                roberta)))
    words = ["John", "Smith", "lives", "in", "Paris"]
    data = SimpleNamespace(max_length=32, pad_to_max_length=False)
    trained = task.tokenize(tokenizer, Examples({"tokens": [words]}, tag_rows([1, 2, 0, 0, 1])), data)["input_ids"][0]
    assert "ĠSmith" in tokenizer.convert_ids_to_tokens(trained)
    # A checkpoint (the Trainer saves the tokenizer with it), exported and served by predict.
    export = tmp_path / "export"
    tokenizer.save_pretrained(export)
    BertForTokenClassification(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=37, num_labels=3,
                                          id2label=ID2LABEL)).save_pretrained(export)
    (export / TASK_FILE).write_text(json.dumps({"type": "token-classification"}))
    served = build_task_for_model_dir(str(export)).build_pipeline(str(export)).tokenizer
    encoded = served(" ".join(words), return_offsets_mapping=True)
    assert encoded["input_ids"] == trained
    assert encoded["offset_mapping"][encoded["input_ids"].index(served.convert_tokens_to_ids("ĠSmith"))] == (5, 10)


def test_a_sentencepiece_word_gets_its_leading_mark_alone_as_in_raw_text(tmp_path):
    """Llama's Metaspace pre-tokenizer (prepend_scheme "first") marks every word encoded alone
    with the "▁" it has in running text: nothing to set, and training and serving agree."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    # Trained split at whitespace (no piece spans two words, as in SentencePiece vocabularies),
    # then used as Llama's tokenizer.json is.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.train_from_iterator(["John Smith lives in Paris", "Mary met John Smith in Washington"] * 10,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"]))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="</s>")
    task = build_task({"type": "token-classification", "id2label": ID2LABEL})
    before = tokenizer.backend_tokenizer.to_str()
    assert task.prepare_tokenizer(tokenizer) is tokenizer and tokenizer.backend_tokenizer.to_str() == before
    words = ["Mary", "met", "John", "Smith"]
    data = SimpleNamespace(max_length=32, pad_to_max_length=False)
    trained = task.tokenize(tokenizer, Examples({"tokens": [words]}, tag_rows([1, 0, 1, 2])), data)["input_ids"][0]
    assert trained == tokenizer(" ".join(words))["input_ids"]
    assert [t for t in tokenizer.convert_ids_to_tokens(trained) if "Smith" in t] == ["▁Smith"]


def test_a_wordpiece_tokenizer_is_left_as_it_is(tmp_path):
    from transformers import AutoTokenizer

    model_dir = write_model_dir(tmp_path / "ner", {"type": "token-classification"})
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert build_task("token-classification").prepare_tokenizer(tokenizer) is tokenizer
    assert "add_prefix_space" not in tokenizer.init_kwargs


# --- every task: no more tokens than data.max_length -----------------------------------------
def run_counting_tokens(task, pipe, inputs: list) -> list[int]:
    """``task.run_predict`` as predict and the MLflow model call it; the length of each
    sequence the model was given."""
    seen, forward = [], pipe.model.forward

    def counting(*args, **kwargs):
        seen.append(kwargs["input_ids"].shape[-1])
        return forward(*args, **kwargs)

    pipe.model.forward = counting
    task.run_predict(pipe, inputs, batch_size=1)
    return seen


@pytest.mark.parametrize("task_type", ["text-classification", "regression", "multi-label-classification",
                                       "token-classification"])
def test_predict_truncates_at_the_jobs_max_length_as_training_did(tmp_path, task_type):
    settings = build_task_settings({"job": {"task": {"type": task_type}, "data": {"max_length": 16}}})
    assert settings == {"type": task_type, "max_length": 16,
                        **({"text_pair": False} if task_type != "token-classification" else {})}
    model_dir = write_model_dir(tmp_path / "model", settings)
    task = build_task_for_model_dir(model_dir)
    pipe = task.build_pipeline(model_dir)
    words = "the movie was long".split() * 30  # 120 words, 150 tokens
    data = SimpleNamespace(max_length=16, pad_to_max_length=False)
    if task_type == "token-classification":
        trained = task.tokenize(pipe.tokenizer, Examples({"tokens": [words]}, tag_rows([0] * len(words))), data)
    else:
        trained = task.tokenize(pipe.tokenizer, Examples({"text": [" ".join(words)]}, np.zeros(1)), data)
    seen = run_counting_tokens(task, pipe, [" ".join(words)])
    if task_type == "token-classification":  # tagged in windows of training's length, all of it
        windows = pipe.tokenizer(" ".join(words), truncation=True, max_length=16, stride=4,
                                 return_overflowing_tokens=True)["input_ids"]
        assert set(seen) == {len(trained["input_ids"][0])} == {16} and len(seen) == len(windows) > 1
    else:
        assert seen == [len(trained["input_ids"][0])] == [16]
    if task.accepts_text_pair:
        pair = Examples({"text": [" ".join(words)], "text_pair": [" ".join(words)]}, np.zeros(1))
        assert run_counting_tokens(task, pipe, [{"text": " ".join(words), "text_pair": " ".join(words)}]) == \
            [len(task.tokenize(pipe.tokenizer, pair, data)["input_ids"][0])] == [16]
    usage = "\n".join(task.build_usage_example())
    compile(usage, "<model card>", "exec")
    assert ("model_max_length = 16" if task_type == "token-classification" else "max_length=16") in usage


def test_an_export_without_max_length_reads_up_to_the_tokenizers_limit(tmp_path):
    model_dir = write_model_dir(tmp_path / "old", {"type": "text-classification"})
    task = build_task_for_model_dir(model_dir)
    pipe = task.build_pipeline(model_dir)
    assert run_counting_tokens(task, pipe, [" ".join(["movie"] * 600)]) == [MODEL_MAX_LENGTH]
    assert "max_length" not in "\n".join(task.build_usage_example())
    assert "max_length" not in build_task_settings({"job": {"task": {"type": "regression"}}})


def test_a_masked_lm_text_is_not_cut_before_its_mask_token(tmp_path):
    """A language model's input is not truncated: the mask token (or a prompt's end) past
    data.max_length is what it predicts from."""
    model_dir = write_model_dir(tmp_path / "mlm", {"type": "masked-lm", "max_length": 16})
    task = build_task_for_model_dir(model_dir)
    pipe = task.build_pipeline(model_dir)
    assert pipe.tokenizer.model_max_length == MODEL_MAX_LENGTH
    [prediction] = task.run_predict(pipe, [" ".join(["movie"] * 30) + " [MASK]"])
    assert len(prediction["predictions"]) == 5
    assert not build_task("causal-lm").truncates_inputs


def test_an_export_records_several_prompt_columns_for_serving():
    job = {"task": {"type": "causal-lm"}, "data": {"prompt_column": ["instruction", "context"],
                                                   "completion_column": "response"}}
    settings = build_task_settings({"job": job})
    assert settings["prompt_columns"] == ["instruction", "context"]
    assert build_task(settings).settings.prompt_columns == ["instruction", "context"]
    one = {**job, "data": {"prompt_column": "instruction", "completion_column": "response"}}
    assert "prompt_columns" not in build_task_settings({"job": one})


def test_a_served_task_defaults_every_setting_as_the_job_config_does():
    """ftplat_task.json leaves out the settings a job left at their defaults, so serving falls
    back to TaskSettings' defaults: each must be the job config's (threshold None means 0.5)."""
    import dataclasses

    from ftplat.config.schema import TaskConfig
    from ftplat.tasks.values import TaskSettings

    served = {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
              for f in dataclasses.fields(TaskSettings) if f.name != "type"}
    configured = {name: f.get_default(call_default_factory=True) for name, f in TaskConfig.model_fields.items()
                  if name != "type"}
    assert set(configured) <= set(served)
    assert {**configured, "threshold": 0.5} == {name: served[name] for name in configured}
