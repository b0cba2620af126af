"""masked-lm and causal-lm: config checks and refusals, blocks, packing and prompt masking, the
chat template, collators, token metrics and perplexity, a training step, and serving
(fill-mask, generation) on a tiny BERT and a tiny Llama built here (no Ray, no hub)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from ftplat.cli.main import main as ftplat_main
from ftplat.config.data_config import DataConfig
from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.tasks import TASK_FILE, build_task, build_task_for_model_dir
from ftplat.tasks.base import IGNORED_LABEL, Examples
from ftplat.tasks.causal_lm import CausalLM
from ftplat.tasks.language_model import (compute_perplexity, compute_token_accuracy, group_into_blocks,
                                         reduce_logits_to_ids)
from ftplat.tasks.masked_lm import MaskedLM
from tiny_assets import (TINY_CHAT_TEMPLATE, build_color_rows, build_tiny_llama_tokenizer, write_tiny_bert_mlm,
                         write_tiny_llama)

X = IGNORED_LABEL
WORDS = "the a movie film was is great awful good bad plot story fun dull".split()


def make_job(task: dict, model=None, data=None, **sections) -> JobConfig:
    return JobConfig.model_validate({"task": task, "model": model or {}, "data": data or {}, **sections})


def examples(**inputs) -> Examples:
    rows = len(next(iter(inputs.values())))
    return Examples({k: list(v) for k, v in inputs.items()}, np.zeros(rows, dtype=np.int8))


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return write_tiny_bert_mlm(tmp_path_factory.mktemp("tiny-mlm"), WORDS)


@pytest.fixture(scope="module")
def bert_tokenizer(mlm_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(mlm_dir)


@pytest.fixture(scope="module")
def llama_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-llama")
    return {"plain": write_tiny_llama(root / "plain", pad_token=False),
            "chat": write_tiny_llama(root / "chat", chat_template=True)}


# --- configuration -------------------------------------------------------------------------
@pytest.mark.parametrize("task_type", ["masked-lm", "causal-lm"])
def test_loss_is_the_default_metric_and_objective(task_type):
    from ftplat.config.loading import load_sweep_configs

    job, space = load_sweep_configs(None, None, [f"task.type={task_type}"])
    assert job.model.num_labels is None and job.model.id2label is None
    assert job.training.metric_for_best_model == "eval_loss" and job.training.greater_is_better is False
    assert (space.objective.metric, space.objective.mode) == ("eval_loss", "min")
    assert build_task(job).build_metric_modes() == {"loss": "min", "perplexity": "min", "accuracy": "max"}


def test_mlm_probability_is_searchable_and_reaches_the_collator(bert_tokenizer):
    from ftplat.config.loading import load_sweep_configs

    job, space = load_sweep_configs(None, None, [
        "task.type=masked-lm", "search.parameters.task.mlm_probability={type: uniform, low: 0.1, high: 0.3}"])
    assert "task.mlm_probability" in space.parameters and job.task.mlm_probability == 0.15
    trial = JobConfig.model_validate({**job.model_dump(), "task": {**job.task.model_dump(), "mlm_probability": 0.3}})
    assert build_task(trial).build_collator(bert_tokenizer).mlm_probability == 0.3
    with pytest.raises(Exception, match="mlm_probability applies to task.type masked-lm only, not text-classification"):
        load_sweep_configs(None, None, ["search.parameters.task.mlm_probability={type: uniform, low: 0.1, high: 0.3}"])


@pytest.mark.parametrize("task, model, data, expected", [
    ({"type": "text-classification", "mlm_probability": 0.2}, {}, {}, r"mlm_probability applies to task.type masked"),
    ({"type": "causal-lm", "line_by_line": True}, {}, {}, r"line_by_line applies to task.type masked-lm only"),
    ({"type": "masked-lm", "packing": True}, {}, {}, r"packing applies to task.type causal-lm only, not masked-lm"),
    ({"type": "regression", "chat_template": False}, {}, {}, r"chat_template applies to task.type causal-lm"),
    ({"type": "masked-lm", "mlm_probability": 1.0}, {}, {}, r"mlm_probability\n.*less than 1"),
    ({"type": "masked-lm", "mlm_probability": 0.0}, {}, {}, r"mlm_probability\n.*greater than 0"),
    ({"type": "masked-lm"}, {"num_labels": 2}, {}, r"model\.num_labels is for classification heads.*remove model\.num"),
    ({"type": "causal-lm"}, {"id2label": {0: "a", 1: "b"}}, {}, r"model\.id2label is for classification heads"),
    ({"type": "masked-lm"}, {}, {"label_columns": ["a", "b"]}, r"data\.label_columns .* reads raw text .*remove it"),
    ({"type": "causal-lm"}, {}, {"text_pair_column": "b"}, r"data\.text_pair_column .* not task\.type causal-lm"),
    ({"type": "masked-lm"}, {}, {"prompt_column": "q", "completion_column": "a"},
     r"data\.prompt_column applies to task\.type causal-lm .* not task\.type masked-lm, which reads "
     r"data\.text_column 'text'; remove it"),
    ({"type": "text-classification"}, {}, {"prompt_column": "q", "completion_column": "a"},
     r"data\.prompt_column applies to task\.type causal-lm"),
    ({"type": "causal-lm"}, {}, {"prompt_column": "q"}, r"prompt_column is set but completion_column is not"),
    ({"type": "causal-lm"}, {}, {"completion_column": "a"}, r"completion_column is set but prompt_column is not"),
    ({"type": "causal-lm"}, {}, {"prompt_column": "q", "completion_column": "q"}, r"both name column 'q'"),
    ({"type": "causal-lm", "chat_template": True}, {}, {}, r"task\.chat_template is true but the data is raw text"),
])
def test_job_refusals_name_the_field_and_the_fix(task, model, data, expected):
    with pytest.raises(ValueError, match=expected):
        make_job(task, model, data)


def test_every_dumped_job_validates_again():
    """Each trial's job is a dump with every task's defaults: they must not be refused."""
    for job in (JobConfig(), make_job({"type": "masked-lm", "mlm_probability": 0.3, "line_by_line": True}),
                make_job({"type": "causal-lm", "packing": True, "chat_template": False},
                         data={"prompt_column": "q", "completion_column": "a"})):
        assert JobConfig.model_validate(job.model_dump()) == job
        assert JobConfig.model_validate(json.loads(json.dumps(job.model_dump(mode="json")))) == job


def test_the_task_reads_text_or_a_prompt_and_completion():
    assert build_task("masked-lm").read_columns(DataConfig(text_column="body")) == {"text_column": "body"}
    causal = build_task("causal-lm")
    assert causal.read_columns(DataConfig()) == {"text_column": "text"}
    data = DataConfig(prompt_column="q", completion_column="a")
    assert causal.read_columns(data) == {"prompt_column": "q", "completion_column": "a"}
    ds = {"q": ["why"], "a": ["because"], "text": ["ignored"]}
    assert causal.build_inputs(ds, data) == {"prompt": ["why"], "completion": ["because"]}
    assert causal.build_labels(ds["q"], data, None, "train").shape == (1,)
    assert causal.build_stratify_key(np.zeros(3)) is None and causal.build_label_stats(np.zeros(3)) == {}
    assert (build_task("masked-lm").peft_task_type, causal.peft_task_type) == (None, "CAUSAL_LM")


def test_the_training_arguments_are_the_users_for_a_language_model(tmp_path):
    """Perplexity needs no evaluation losses (the reducer sums each row's NLL), so a user's
    metric_fn gets HF's two-item EvalPrediction, as run_mlm.py's compute_metrics unpacks it."""
    from ftplat.train.arguments import build_training_arguments

    args = build_training_arguments(make_job({"type": "masked-lm"}), output_dir=str(tmp_path))
    assert args.include_for_metrics == []


# --- blocks, lines, packing and prompts ----------------------------------------------------
def test_group_into_blocks_concatenates_and_keeps_the_short_last_block():
    grouped = group_into_blocks({"input_ids": [[1, 2, 3], [4, 5], [6, 7, 8, 9]],
                                 "labels": [[X, 2, 3], [4, 5], [X] * 4]}, 4)
    assert grouped == {"input_ids": [[1, 2, 3, 4], [5, 6, 7, 8], [9]], "labels": [[X, 2, 3, 4], [5, X, X, X], [X]]}
    assert group_into_blocks({"input_ids": [[1, 2]]}, 8) == {"input_ids": [[1, 2]]}


def test_masked_lm_cuts_the_texts_into_blocks_without_labels(bert_tokenizer):
    texts = ["the movie was great fun", "a dull plot", "the story is good and the film is bad"]
    columns = build_task("masked-lm").tokenize(bert_tokenizer, examples(text=texts), DataConfig(max_length=8))
    assert "labels" not in columns and set(columns) >= {"input_ids", "attention_mask"}
    whole = [i for t in texts for i in bert_tokenizer(t)["input_ids"]]  # [CLS] text [SEP] per text
    assert [i for row in columns["input_ids"] for i in row] == whole
    full, rest = divmod(len(whole), 8)
    assert [len(r) for r in columns["input_ids"]] == [8] * full + ([rest] if rest else [])
    assert all(set(m) == {1} for m in columns["attention_mask"])


def test_masked_lm_line_by_line_truncates_and_pads_each_text(bert_tokenizer):
    task = build_task({"type": "masked-lm", "line_by_line": True})
    texts = ["the movie was great fun and the plot was good", "a dull plot"]
    columns = task.tokenize(bert_tokenizer, examples(text=texts), DataConfig(max_length=8))
    assert [len(r) for r in columns["input_ids"]] == [8, 5] and "labels" not in columns
    assert columns["input_ids"][0][-1] == bert_tokenizer.sep_token_id
    padded = task.tokenize(bert_tokenizer, examples(text=texts), DataConfig(max_length=8, pad_to_max_length=True))
    assert [len(r) for r in padded["input_ids"]] == [8, 8] and padded["attention_mask"][1] == [1] * 5 + [0] * 3


def test_causal_lm_text_is_its_own_label_and_ends_with_eos():
    tok = build_tiny_llama_tokenizer()
    columns = build_task("causal-lm").tokenize(tok, examples(text=["the movie was great", "a dull plot"]),
                                               DataConfig(max_length=8))
    ids = tok(["the movie was great", "a dull plot"])["input_ids"]
    assert columns["input_ids"] == [row + [tok.eos_token_id] for row in ids] == columns["labels"]
    assert columns["input_ids"][0][0] == tok.bos_token_id
    assert columns["attention_mask"] == [[1] * len(r) for r in columns["input_ids"]]


def test_causal_lm_masks_the_prompt_and_learns_the_completion_and_eos():
    tok = build_tiny_llama_tokenizer()
    task = build_task("causal-lm")
    columns = task.tokenize(tok, examples(prompt=["what color is the sky ?"], completion=["blue"]),
                            DataConfig(prompt_column="q", completion_column="a", max_length=64))
    prompt = tok("what color is the sky ?")["input_ids"]
    blue, eos = tok.convert_tokens_to_ids("blue"), tok.eos_token_id
    assert columns["input_ids"] == [prompt + [blue, eos]]
    assert columns["labels"] == [[X] * len(prompt) + [blue, eos]]


def test_packing_carries_the_prompt_masking_into_the_blocks():
    tok = build_tiny_llama_tokenizer()
    rows = build_color_rows(6, seed=3)
    task = build_task({"type": "causal-lm", "packing": True})
    data = DataConfig(prompt_column="prompt", completion_column="completion", max_length=16)
    packed = task.tokenize(tok, examples(**rows), data)
    single = build_task("causal-lm").tokenize(tok, examples(**rows), data.model_copy(update={"max_length": 64}))
    assert [i for r in packed["input_ids"] for i in r] == [i for r in single["input_ids"] for i in r]
    assert [t for r in packed["labels"] for t in r] == [t for r in single["labels"] for t in r]
    assert all(len(r) == 16 for r in packed["input_ids"][:-1]) and len(packed["input_ids"][-1]) <= 16
    learned = [t for r in packed["labels"] for t in r if t != X]
    assert learned == [t for c in rows["completion"] for t in (tok.convert_tokens_to_ids(c), tok.eos_token_id)]


def test_without_packing_long_examples_are_truncated_and_a_lost_completion_is_logged(caplog):
    tok = build_tiny_llama_tokenizer()
    data = DataConfig(prompt_column="q", completion_column="a", max_length=8, pad_to_max_length=True)
    long_prompt = "the movie was great and the plot was fun and the story was good"
    with caplog.at_level(logging.WARNING):
        columns = build_task("causal-lm").tokenize(
            tok, examples(prompt=[long_prompt, "a movie"], completion=["fun", "dull"]), data)
    assert "1 of 2 examples have no completion token within data.max_length 8" in caplog.text
    assert "1 of 2 examples are longer than data.max_length 8:" in caplog.text
    assert [len(r) for r in columns["input_ids"]] == [8, 8] and columns["labels"][0] == [X] * 8
    assert columns["input_ids"][1][-3:] == [tok.pad_token_id] * 3 and columns["labels"][1][-3:] == [X] * 3
    assert columns["attention_mask"][1] == [1] * 5 + [0] * 3


def test_raw_text_cut_at_max_length_is_counted_in_a_warning(caplog):
    """A document longer than data.max_length lost its tail (and its EOS) without a word."""
    tok = build_tiny_llama_tokenizer()
    text = "the movie was great and the plot was fun and the story was good"
    with caplog.at_level(logging.WARNING):
        columns = build_task("causal-lm").tokenize(tok, examples(text=[text, "a movie"]), DataConfig(max_length=8))
    total = len(tok(text)["input_ids"]) + 1 + len(tok("a movie")["input_ids"]) + 1
    cut = len(tok(text)["input_ids"]) + 1 - 8
    assert f"1 of 2 examples are longer than data.max_length 8: {cut} of the split's {total} tokens" in caplog.text
    assert "end without EOS" in caplog.text and "task.packing: true" in caplog.text
    assert columns["input_ids"][0][-1] != tok.eos_token_id and columns["input_ids"][1][-1] == tok.eos_token_id


@pytest.mark.parametrize("setting, has_template, used", [
    (None, True, True), (None, False, False), (True, True, True), (False, True, False)])
def test_the_chat_template_renders_the_prompt_as_a_user_turn(setting, has_template, used):
    tok = build_tiny_llama_tokenizer(chat_template=has_template)
    task = build_task({"type": "causal-lm", "chat_template": setting})
    assert task.uses_chat_template(tok) is used
    columns = task.tokenize(tok, examples(prompt=["what color is the sky ?"], completion=["blue"]),
                            DataConfig(prompt_column="q", completion_column="a"))
    if used:
        # the ids the text-generation pipeline generates from (apply_chat_template, tokenized)
        prompt = tok.apply_chat_template([{"role": "user", "content": "what color is the sky ?"}],
                                         add_generation_prompt=True)["input_ids"]
        assert tok.decode(prompt) == "<s> user : what color is the sky? assistant :"
    else:
        prompt = tok("what color is the sky ?")["input_ids"]
    assert columns["input_ids"][0] == prompt + [tok.convert_tokens_to_ids("blue"), tok.eos_token_id]
    assert columns["labels"][0][:len(prompt)] == [X] * len(prompt)


def test_a_required_chat_template_the_tokenizer_lacks_is_refused():
    with pytest.raises(UserError, match=r"task\.chat_template is true but the tokenizer .* has no chat template"):
        build_task({"type": "causal-lm", "chat_template": True}).uses_chat_template(build_tiny_llama_tokenizer())
    assert TINY_CHAT_TEMPLATE in build_tiny_llama_tokenizer(chat_template=True).chat_template


def test_prepare_tokenizer_pads_with_eos_and_refuses_what_the_task_cannot_use(bert_tokenizer):
    tok = build_tiny_llama_tokenizer(pad_token=False)
    assert tok.pad_token is None
    assert build_task("causal-lm").prepare_tokenizer(tok).pad_token == tok.eos_token
    with pytest.raises(UserError, match="without a mask token; task.type masked-lm .* task.type causal-lm"):
        build_task("masked-lm").prepare_tokenizer(build_tiny_llama_tokenizer())
    assert build_task("masked-lm").prepare_tokenizer(bert_tokenizer) is bert_tokenizer


# --- collators -----------------------------------------------------------------------------
def test_causal_collator_pads_inputs_with_the_pad_token_and_labels_with_ignored():
    tok = build_task("causal-lm").prepare_tokenizer(build_tiny_llama_tokenizer(pad_token=False))
    batch = build_task("causal-lm").build_collator(tok)([
        {"input_ids": [1, 5, 6, 2], "attention_mask": [1] * 4, "labels": [X, X, 6, 2]},
        {"input_ids": [1, 7], "attention_mask": [1, 1], "labels": [1, 7]}])
    assert batch["input_ids"].tolist() == [[1, 5, 6, 2], [1, 7, 2, 2]]  # pad = eos
    assert batch["labels"].tolist() == [[X, X, 6, 2], [1, 7, X, X]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]] and "decoder_input_ids" not in batch


def test_mlm_collator_masks_only_real_tokens_and_labels_only_those(bert_tokenizer):
    torch.manual_seed(0)
    collator = build_task({"type": "masked-lm", "mlm_probability": 0.5}).build_collator(bert_tokenizer)
    rows = [bert_tokenizer("the movie was great fun and the plot was good")["input_ids"], [2, 10, 3]]
    batch = collator([{"input_ids": r} for r in rows])
    original = torch.tensor([rows[0], rows[1] + [0] * (len(rows[0]) - 3)])
    labelled = batch["labels"] != X
    assert labelled.any() and (batch["labels"][labelled] == original[labelled]).all()
    special = torch.isin(original, torch.tensor(bert_tokenizer.all_special_ids))
    assert not (labelled & special).any()
    assert ((batch["input_ids"] != original) <= labelled).all()  # only labelled positions changed


def test_an_evaluation_table_is_masked_once_and_the_collator_keeps_its_masks(bert_tokenizer):
    from ftplat.data.compact import build_compact_table

    task = build_task({"type": "masked-lm", "mlm_probability": 0.3})
    rows = [bert_tokenizer(" ".join(WORDS[i % 7:i % 7 + 3 + i % 5]))["input_ids"] for i in range(40)]
    table = build_compact_table({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})
    masked = task.build_evaluation_table(table, bert_tokenizer, seed=7)
    assert masked.equals(task.build_evaluation_table(table, bert_tokenizer, seed=7))
    assert not masked.equals(task.build_evaluation_table(table, bert_tokenizer, seed=8))
    ids, labels = masked.column("input_ids").to_pylist(), masked.column("labels").to_pylist()
    special = set(bert_tokenizer.all_special_ids)
    assert [len(r) for r in ids] == [len(r) for r in labels] == [len(r) for r in rows]
    chosen = [(o, i, l) for orig, new, lab in zip(rows, ids, labels) for o, i, l in zip(orig, new, lab)]
    assert all(l == X for o, i, l in chosen if o in special)  # special tokens are never masked
    assert all(l in (X, o) and (i == o or l == o) for o, i, l in chosen)  # only labelled positions change
    assert 0.15 < sum(l != X for _, _, l in chosen) / sum(o not in special for o, _, _ in chosen) < 0.45
    # The collator pads a masked table's rows and their labels, masking nothing more.
    collator = task.build_collator(bert_tokenizer)
    features = masked.slice(0, 8).to_pylist()
    batch = collator(features)
    assert torch.equal(batch["input_ids"], collator(features)["input_ids"])
    width = batch["input_ids"].shape[1]
    assert batch["labels"].tolist() == [f["labels"] + [X] * (width - len(f["labels"])) for f in features]


# --- metrics -------------------------------------------------------------------------------
def test_token_accuracy_masked_and_shifted():
    preds = np.array([[5, 6, 7, 8], [1, 2, 3, -100]])
    labels = np.array([[X, 6, 0, X], [1, 9, X, X]])
    assert compute_token_accuracy(preds, labels, shift=False) == pytest.approx(2 / 4)
    # causal: the prediction at i is of the label at i + 1
    assert compute_token_accuracy(preds, np.array([[X, 5, 6, 0], [X, 1, 2, X]]), shift=True) == pytest.approx(4 / 5)
    assert math.isnan(compute_token_accuracy(preds, np.full((2, 4), X), shift=False))
    logits = np.eye(10)[preds.clip(0)]
    assert compute_token_accuracy(logits, labels, shift=False) == pytest.approx(2 / 4)


def test_perplexity_is_exp_of_the_mean_nll_per_token_and_guards_overflow():
    # rows of 1 and 3 label tokens: weighted by tokens, not a mean of the rows' means
    assert compute_perplexity(np.array([1.0, 9.0]), np.array([1, 3])) == pytest.approx(math.exp(10 / 4))
    assert compute_perplexity(np.array([800.0]), np.array([1])) == math.inf
    assert math.isnan(compute_perplexity(np.array([0.0]), np.array([0])))


@pytest.mark.parametrize("kind, shift", [("masked-lm", False), ("causal-lm", True)])
def test_the_logits_reducer_keeps_argmax_ids_and_each_rows_nll(kind, shift):
    logits = torch.randn(2, 4, 11)
    labels = torch.tensor([[X, 3, 4, X], [1, 2, 3, 4]])
    assert torch.equal(reduce_logits_to_ids(logits, None), logits.argmax(-1))
    ids, nll, count = build_task(kind).build_logits_reducer()((logits, torch.zeros(1)), labels)
    assert torch.equal(ids, logits.argmax(-1))
    scored, targets = (logits[:, :-1], labels[:, 1:]) if shift else (logits, labels)
    for row in range(2):
        keep = targets[row] != X
        expected = torch.nn.functional.cross_entropy(scored[row][keep], targets[row][keep], reduction="sum")
        assert nll[row].item() == pytest.approx(expected.item(), rel=1e-5)
        assert count[row].item() == int(keep.sum())


def test_compute_metrics_adds_perplexity_accuracy_and_the_users(monkeypatch, tmp_path):
    from transformers import EvalPrediction

    (tmp_path / "lm_metrics.py").write_text("def compute(p):\n    return {'answered': float(len(p.label_ids))}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    job = make_job({"type": "causal-lm", "metric_fn": "lm_metrics:compute", "metric_modes": {"answered": "max"}})
    pred = EvalPrediction(predictions=(np.array([[4, 5, 6]]), np.array([2.0]), np.array([2])),
                          label_ids=np.array([[X, 4, 5]]))
    metrics = build_task(job).compute_metrics(pred)
    assert metrics == {"perplexity": pytest.approx(math.e), "accuracy": 1.0, "answered": 1.0}
    # run_mlm.py's own compute_metrics: two items, predicted ids
    (tmp_path / "run_mlm_metrics.py").write_text(
        "import numpy as np\n"
        "def compute(eval_preds):\n"
        "    preds, labels = eval_preds\n"
        "    mask = labels.reshape(-1) != -100\n"
        "    return {'mlm_acc': float((preds.reshape(-1)[mask] == labels.reshape(-1)[mask]).mean())}\n")
    job = make_job({"type": "masked-lm", "metric_fn": "run_mlm_metrics:compute", "metric_modes": {"mlm_acc": "max"}})
    pred = EvalPrediction(predictions=(np.array([[4, 5, 7]]), np.array([3.0]), np.array([2])),
                          label_ids=np.array([[X, 5, 6]]))
    assert build_task(job).compute_metrics(pred)["mlm_acc"] == 0.5


# --- a training step, and an MLM export seeding a classifier -------------------------------
def write_parquet_splits(root: Path, rows: dict[str, dict[str, list]]) -> Path:
    root.mkdir(parents=True)
    for split, columns in rows.items():
        pq.write_table(pa.table(columns), root / f"{split}.parquet")
    return root


@pytest.mark.parametrize("kind", ["masked-lm", "causal-lm"])
def test_data_preparation_and_a_training_epoch(kind, mlm_dir, llama_dirs, tmp_path):
    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.train.worker import build_trainer

    if kind == "masked-lm":
        texts = {s: {"text": [" ".join(WORDS[i % 7:i % 7 + 6]) for i in range(n)]}
                 for s, n in (("train", 40), ("test", 10))}
        source, extra = write_parquet_splits(tmp_path / "data", texts), {}
        task, model = {"type": "masked-lm"}, str(mlm_dir)
    else:
        colors = {"train": build_color_rows(40, 1), "test": build_color_rows(10, 2)}
        source, extra = write_parquet_splits(tmp_path / "data", colors), {"prompt_column": "prompt",
                                                                         "completion_column": "completion"}
        task, model = {"type": "causal-lm", "packing": True}, str(llama_dirs["plain"])
    job = make_job(task, {"name_or_path": model}, {"source": str(source), "max_length": 16, **extra},
                   training={"num_train_epochs": 1.0, "per_device_train_batch_size": 8, "learning_rate": 1.0e-3},
                   tracking={"enabled": False})
    tokenized = build_tokenized_tables(job)
    stats = tokenized.stats
    assert (stats["train"]["rows"], stats["eval"]["rows"], stats["test"]["rows"]) == (36, 4, 10)
    assert stats["train"]["sequences"] == tokenized.train.num_rows != 36  # blocks, not examples
    assert ("labels" in tokenized.train.column_names) is (kind == "causal-lm")
    trainer = build_trainer(job, train_table=tokenized.train, eval_table=tokenized.eval, output_dir=str(tmp_path / "o"))
    trainer.train()
    metrics = trainer.evaluate()
    assert metrics["eval_perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]), rel=1e-4)  # one batch
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    if kind == "causal-lm":
        # Batches of one row: eval_loss becomes a mean of the rows' means, perplexity stays
        trainer.args.per_device_eval_batch_size = 1
        by_row = trainer.evaluate()
        assert by_row["eval_perplexity"] == pytest.approx(metrics["eval_perplexity"], rel=1e-4)
        assert by_row["eval_loss"] != pytest.approx(metrics["eval_loss"], rel=1e-4)
    else:
        # The eval table is masked once per trial: another evaluation, at any batch size, scores
        # the same tokens (each evaluation drew new masks, and the noise chose the best checkpoint).
        assert trainer.evaluate()["eval_loss"] == pytest.approx(metrics["eval_loss"], rel=1e-6)
        trainer.args.per_device_eval_batch_size = 1
        assert trainer.evaluate()["eval_perplexity"] == pytest.approx(metrics["eval_perplexity"], rel=1e-4)
        # ...and so does a trial of another (searched) training.seed: the masks are the sweep's
        other = build_trainer(job.model_copy(update={"training": job.training.model_copy(update={"seed": 7})}),
                              train_table=None, eval_table=tokenized.eval, output_dir=str(tmp_path / "o7"))
        assert other.eval_dataset["input_ids"] == trainer.eval_dataset["input_ids"]


def test_an_mlm_model_seeds_a_text_classification_model(mlm_dir):
    from ftplat.config.model_files import check_model_dir
    from ftplat.train.modeling import build_model

    job = make_job({"type": "text-classification"}, {"name_or_path": str(mlm_dir)})
    check_model_dir(job.model)
    model = build_model(job)
    assert type(model).__name__ == "BertForSequenceClassification" and model.config.num_labels == 2


def test_empty_completions_are_refused_or_dropped(llama_dirs, tmp_path):
    from ftplat.data.preparation import build_tokenized_tables

    rows = build_color_rows(20, 1)
    rows["completion"][3] = " "
    source = write_parquet_splits(tmp_path / "data", {"train": rows})
    data = {"source": str(source), "prompt_column": "prompt", "completion_column": "completion", "test_split": None}
    job = make_job({"type": "causal-lm"}, {"name_or_path": str(llama_dirs["plain"])}, data)
    with pytest.raises(UserError, match=r"data\.completion_column 'completion' of split 'train' has 1 empty"):
        build_tokenized_tables(job)
    job = make_job({"type": "causal-lm"}, {"name_or_path": str(llama_dirs["plain"])}, {**data, "empty_texts": "drop"})
    stats = build_tokenized_tables(job).stats
    assert stats["train"]["rows"] + stats["eval"]["rows"] == 19 and stats["train"]["dropped_empty_texts"] == 1


# --- serving -------------------------------------------------------------------------------
def test_the_task_is_read_from_the_head_in_config_json(mlm_dir, llama_dirs, tmp_path):
    assert isinstance(build_task_for_model_dir(str(mlm_dir)), MaskedLM)
    assert isinstance(build_task_for_model_dir(str(llama_dirs["plain"])), CausalLM)
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    assert build_task_for_model_dir(str(gpt2)).name == "causal-lm"


def run_predict(capsys, *args) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = ftplat_main(["predict", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_fill_mask_predicts_the_top_tokens_and_needs_one_mask(mlm_dir, capsys):
    code, lines, _ = run_predict(capsys, mlm_dir, "--json", "the movie was [MASK]", "a [MASK] plot")
    assert code == 0
    rows = [json.loads(line) for line in lines]
    assert rows[0]["text"] == "the movie was [MASK]"
    for row in rows:
        assert len(row["predictions"]) == 5 and set(row["predictions"][0]) == {"token", "score"}
        scores = [p["score"] for p in row["predictions"]]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    code, lines, _ = run_predict(capsys, mlm_dir, "the [MASK] was fun")  # one input: the pipeline unwraps it
    assert code == 0 and len(lines) == 1 and lines[0].endswith("\tthe [MASK] was fun") and lines[0].count(":") == 5
    code, _, err = run_predict(capsys, mlm_dir, "the movie was great")
    assert code == 2 and "input 1 holds 0 mask tokens" in err and "put [MASK] once" in err
    code, _, err = run_predict(capsys, mlm_dir, "a [MASK] movie", "--max-new-tokens", "3")
    assert code == 2 and "--max-new-tokens applies to models that generate text (causal-lm)" in err


def test_generation_continues_each_prompt(llama_dirs, capsys):
    code, lines, _ = run_predict(capsys, llama_dirs["plain"], "--json", "--max-new-tokens", "3",
                                 "what is the color of the sky ? answer :", "the movie")
    assert code == 0
    rows = [json.loads(line) for line in lines]
    assert [set(r) for r in rows] == [{"text", "generated_text"}] * 2
    assert all(isinstance(r["generated_text"], str) and len(r["generated_text"].split()) <= 3 for r in rows)
    greedy = [json.loads(line) for line in run_predict(capsys, llama_dirs["plain"], "--json", "--max-new-tokens", "3",
                                                       "what is the color of the sky ? answer :", "the movie")[1]]
    assert greedy == rows  # temperature 0: the same continuation every time
    code, lines, _ = run_predict(capsys, llama_dirs["plain"], "--temperature", "0.8", "--max-new-tokens", "2", "the")
    assert code == 0 and len(lines) == 1
    for flags, expected in ((["--max-new-tokens", "0"], "--max-new-tokens is 0"), (["--temperature", "-1"],
                                                                                   "--temperature is -1.0")):
        code, _, err = run_predict(capsys, llama_dirs["plain"], "the", *flags)
        assert code == 2 and expected in err


class RecordingPipe:
    """Stands in for the text-generation pipeline: records what it is called with."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, []

    def __call__(self, inputs, **kwargs):
        self.calls.append((inputs, kwargs))
        return [[{"generated_text": "blue"}] for _ in inputs]


@pytest.mark.parametrize("setting, chat", [(None, True), (False, False)])
def test_prediction_renders_prompts_as_in_training_and_samples_above_zero(setting, chat):
    task = build_task({"type": "causal-lm", "chat_template": setting})
    pipe = RecordingPipe(build_tiny_llama_tokenizer(chat_template=True))
    assert task.run_predict(pipe, ["what color is the sky ?"], max_new_tokens=5) == [{"generated_text": "blue"}]
    task.run_predict(pipe, ["the"], temperature=0.7)
    (first, greedy), (_, sampled) = pipe.calls
    prompt = "what color is the sky ?"
    assert first == ([[{"role": "user", "content": prompt}]] if chat else [prompt])
    assert greedy == {"batch_size": 32, "max_new_tokens": 5, "return_full_text": False, "do_sample": False}
    assert sampled["do_sample"] is True and sampled["temperature"] == 0.7 and sampled["max_new_tokens"] == 64


def test_the_pyfunc_model_generates_with_params_and_refuses_them_elsewhere(llama_dirs, mlm_dir):
    from ftplat.tracking.pyfunc_model import TaskPipelineModel

    served = TaskPipelineModel()
    served.load_context(SimpleNamespace(artifacts={"hf_model": str(llama_dirs["chat"])}))
    rows = served.predict(None, ["what is the color of the sky ?"], params={"max_new_tokens": 2, "temperature": 0})
    assert [set(r) for r in rows] == [{"generated_text"}]
    assert len(rows[0]["generated_text"].split()) <= 2
    fill = TaskPipelineModel()
    fill.load_context(SimpleNamespace(artifacts={"hf_model": str(mlm_dir)}))
    assert len(fill.predict(None, {"text": ["a [MASK] film"]})[0]["predictions"]) == 5
    with pytest.raises(ValueError, match=r"params max_new_tokens applies to models that generate text"):
        fill.predict(None, ["a [MASK] film"], params={"max_new_tokens": 2})
    # Checked as predict checks its flags: an infinite temperature samples noise, 2.5 tokens are none
    for params, message in (({"temperature": float("inf")}, r"params temperature is inf; give a number from 0.0 up"),
                            ({"max_new_tokens": 2.5}, r"params max_new_tokens is 2.5; give a whole number from 1 up"),
                            ({"temperature": "hot"}, r"params temperature is 'hot'")):
        with pytest.raises(ValueError, match=message):
            served.predict(None, ["what is the color of the sky ?"], params=params)


def test_model_cards_of_language_models(tmp_path):
    from ftplat.checkpoints.card import build_model_card
    from ftplat.records import SweepSummary

    ckpt = {"path": str(tmp_path / "train-t1" / "checkpoint-4"), "exists": True, "step": 4, "epoch": 1.0,
            "eval_loss": 2.5}
    summary = SweepSummary.from_dict({
        "sweep_name": "lm", "sweep_path": str(tmp_path), "objective": {"metric": "eval_loss", "mode": "min"},
        "scope": "last", "metric_for_best_model": "eval_loss", "greater_is_better": False, "task": "causal-lm",
        "trials": [{"trial_id": "t1", "status": "TERMINATED", "hyperparameters": {"training.learning_rate": 1e-3},
                    "scores": {"last": 2.5}, "best_checkpoint": ckpt,
                    "history": [{"step": 4, "epoch": 1.0, "eval_loss": 2.5, "eval_perplexity": 12.2}]}],
        "winner": {"trial_id": "t1", "score": 2.5, "hyperparameters": {}, "best_checkpoint": ckpt},
        "data": {"train": {"split": "train", "rows": 40, "sequences": 12}, "eval": {"split": "validation", "rows": 8}}})
    job = {"task": {"type": "causal-lm", "packing": True, "mlm_probability": 0.15},
           "data": {"source": "./qa", "prompt_column": "question", "completion_column": "answer"}}
    card = build_model_card(summary, summary.winner_trial(), {"job": job})
    assert "Causal language model (task `causal-lm`)" in card
    assert "- columns: prompt `question`, completion `answer`" in card
    assert "- train: split `train`, 40 rows, sequences 12" in card
    assert 'pipeline("text-generation"' in card and "--max-new-tokens" in card
    assert "64 tokens, greedy by default" in card and "- prompt:" not in card
    # The Use section passes what training saw: text for a model trained on text, a chat otherwise
    usage = {setting: "\n".join(build_task({"type": "causal-lm", "chat_template": setting}).build_usage_example())
             for setting in (False, True, None)}
    assert 'gen("the sky is"' in usage[False] and '"role": "user"' not in usage[False]
    assert '"role": "user"' in usage[True] and 'gen("the sky is"' not in usage[True]
    assert '"role": "user"' in usage[None] and 'gen("the sky is"' in usage[None]
    for code in usage.values():
        compile(code.replace("<this directory>", "d"), "<card>", "exec")
    dolly = {**job, "data": {**job["data"], "prompt_column": ["instruction", "context"]}}
    card = build_model_card(summary, summary.winner_trial(), {"job": dolly})
    assert "- prompt: the texts of `instruction` and `context`, a blank line apart (empty ones left out)" in card
    job = {"task": {"type": "masked-lm"}, "data": {"source": "./reviews", "text_column": "review"}}
    card = build_model_card(summary, summary.winner_trial(), {"job": job})
    assert "Masked language model (task `masked-lm`)" in card and "- columns: text `review`" in card
    assert 'pipeline("fill-mask"' in card and "--max-new-tokens" not in card


def test_the_export_of_a_chat_model_keeps_its_chat_template(tmp_path, capsys):
    from ftplat.checkpoints.export import run_export

    sweep = tmp_path / "sweep"
    checkpoint = write_tiny_llama(sweep / "train-t1" / "checkpoint-4", chat_template=True)
    ckpt = {"path": str(checkpoint), "exists": True, "step": 4, "epoch": 1.0, "eval_loss": 2.5}
    (sweep / "summary.json").write_text(json.dumps({
        "sweep_name": "chat", "sweep_path": str(sweep), "objective": {"metric": "eval_loss", "mode": "min"},
        "scope": "last", "metric_for_best_model": "eval_loss", "greater_is_better": False, "task": "causal-lm",
        "trials": [{"trial_id": "t1", "status": "TERMINATED", "hyperparameters": {}, "scores": {"last": 2.5},
                    "best_checkpoint": ckpt, "history": [{"step": 4, "epoch": 1.0, "eval_loss": 2.5}]}],
        "winner": {"trial_id": "t1", "score": 2.5, "hyperparameters": {}, "best_checkpoint": ckpt}}))
    job = {"task": {"type": "causal-lm", "chat_template": True},
           "data": {"prompt_column": "prompt", "completion_column": "completion"}}
    (sweep / "sweep_config.json").write_text(json.dumps({"job": job, "search_space": {}}))
    run_export(str(sweep), str(tmp_path / "export"))
    code, _, err = run_predict(capsys, tmp_path / "export", "--max-new-tokens", "2", "what is the color of the sky ?")
    assert code == 0, err


def test_a_masked_lm_export_keeps_the_base_models_pooler_for_the_classifier_after_it(mlm_dir, tmp_path):
    """Domain adaptation's next step starts a classifier from the MLM export: BERT's MLM class
    drops the pretrained pooler, so that classifier began with a random one."""
    import shutil

    from transformers import BertConfig, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification

    base = tmp_path / "base"
    shutil.copytree(mlm_dir, base)
    BertForPreTraining(BertConfig.from_pretrained(mlm_dir)).save_pretrained(base)  # a pretrained pooler
    out = tmp_path / "export"
    shutil.copytree(base, out)
    BertForMaskedLM.from_pretrained(base).save_pretrained(out)  # what a masked-lm trial saves: no pooler
    before = BertForSequenceClassification.from_pretrained(out).bert.pooler.dense.weight
    expected = BertForPreTraining.from_pretrained(base).bert.pooler.dense.weight
    assert not torch.equal(before, expected)

    build_task("masked-lm").run_complete_export(str(out), {"model": {"name_or_path": str(base)}})
    after = BertForSequenceClassification.from_pretrained(out).bert.pooler.dense.weight
    assert torch.equal(after, expected)
    assert BertForMaskedLM.from_pretrained(out).bert.pooler is None  # still an MLM model that serves as one
