"""``ftplat predict`` and the MLflow pyfunc model serve an exported model as its task: the task
read from the folder, its pipeline's predictions in the task's shape, sentence pairs passed as
pairs, and bad input refused with exit 2 and one line."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ftplat.cli.main import main as ftplat_main
from ftplat.tasks import TASK_FILE, build_task_for_model_dir

WORDS = ("the a movie film great awful good bad man woman is was playing guitar song sings "
         "paris london john mary lives in works at acme").split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LABELS = {0: "neg", 1: "pos"}
TOPICS = {0: "music", 1: "film", 2: "travel"}
TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def write_tiny_model(root: Path, kind: str) -> Path:
    """A 1-layer, 32-wide BERT with a WordPiece tokenizer, saved like a checkpoint of ``kind``."""
    from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification, BertTokenizerFast

    root.mkdir(parents=True)
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS) + "\n")
    BertTokenizerFast(str(vocab)).save_pretrained(root)
    heads = {
        "text-classification": dict(num_labels=2, id2label=LABELS),
        "regression": dict(num_labels=1, problem_type="regression"),
        "multi-label-classification": dict(num_labels=3, id2label=TOPICS, problem_type="multi_label_classification"),
        "token-classification": dict(num_labels=5, id2label=TAGS),
    }[kind]
    if "id2label" in heads:
        heads["label2id"] = {v: k for k, v in heads["id2label"].items()}
    torch.manual_seed(0)
    # initializer_range 0.5 (not 0.02): outputs that differ between texts, of either sign
    config = BertConfig(vocab_size=len(SPECIAL) + len(WORDS), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=37, max_position_embeddings=64,
                        initializer_range=0.5, **heads)
    model_cls = BertForTokenClassification if kind == "token-classification" else BertForSequenceClassification
    model_cls(config).save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-task-models")
    return {kind: write_tiny_model(root / kind, kind) for kind in
            ("text-classification", "regression", "multi-label-classification", "token-classification")}


def logits_of(model_dir: Path, text: str, text_pair: str | None = None) -> torch.Tensor:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return model(**tokenizer(text, text_pair, return_tensors="pt")).logits[0]


def run_predict(capsys, *args: str) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    code = ftplat_main(["predict", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def run_predict_json(capsys, *args: str) -> list[dict]:
    code, out, err = run_predict(capsys, *args, "--json")
    assert code == 0, err
    return [json.loads(line) for line in out]


# --- the task of a model folder --------------------------------------------------------------

@pytest.mark.parametrize("kind", ["text-classification", "regression", "multi-label-classification",
                                  "token-classification"])
def test_the_task_is_read_from_config_json(models, kind):
    assert not (models[kind] / TASK_FILE).exists()
    assert build_task_for_model_dir(str(models[kind])).name == kind


def test_a_model_without_a_task_head_is_refused_not_served_with_a_random_one(tiny_model_dir, tmp_path, capsys):
    """A base model (BertModel, as a sentence-transformers folder is) predicted with a head
    built at random: a different answer each run, exit 0."""
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny_model_dir, base)
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    code, out, err = run_predict(capsys, base, "good movie")
    assert code == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"error: MODEL_DIR {str(base)!r}: its ftplat_task.json or config.json does not name a "
                             "task ftplat serves (ValueError: its config.json names ['BertModel'], a model without a "
                             "task head")


def test_the_task_file_wins_over_config_json(models, tmp_path):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(models["multi-label-classification"], folder)
    (folder / TASK_FILE).write_text(json.dumps({"type": "multi-label-classification", "threshold": 0.9}))
    assert build_task_for_model_dir(str(folder)).settings.threshold == 0.9
    (folder / TASK_FILE).write_text(json.dumps({"type": "text-classification"}))
    assert build_task_for_model_dir(str(folder)).name == "text-classification"


# --- predictions per task ----------------------------------------------------------------------

def test_text_classification_json_and_table(models, capsys):
    model = models["text-classification"]
    texts = ["great movie", "awful film"]
    rows = run_predict_json(capsys, model, *texts)
    assert [set(r) for r in rows] == [{"text", "label", "score"}] * 2
    for row, text in zip(rows, texts):
        probs = logits_of(model, text).softmax(-1)
        assert row["text"] == text
        assert row["label"] == LABELS[int(probs.argmax())]
        assert row["score"] == pytest.approx(float(probs.max()), abs=1e-5)
    code, out, _ = run_predict(capsys, model, *texts)
    assert code == 0
    assert out == [f"{r['label']}\t{r['score']:.4f}\t{r['text']}" for r in rows]


def test_regression_prints_the_raw_output(models, capsys):
    model = models["regression"]
    rows = run_predict_json(capsys, model, "great movie", "john lives in paris")
    assert [set(r) for r in rows] == [{"text", "value"}] * 2
    for row in rows:
        # function_to_apply none: the head's output itself, not a sigmoid of it
        assert row["value"] == pytest.approx(float(logits_of(model, row["text"])[0]), rel=1e-4, abs=1e-5)
    assert any(not 0 <= r["value"] <= 1 for r in rows), "a sigmoid would squeeze every value into (0, 1)"


def test_multi_label_predicts_the_labels_over_the_threshold(models, capsys, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(models["multi-label-classification"], model)
    texts = ["great movie", "mary sings a song", "john works at acme in london"]
    predicted = {}
    for threshold in (0.3, 0.7):
        (model / TASK_FILE).write_text(json.dumps({"type": "multi-label-classification", "threshold": threshold}))
        rows = run_predict_json(capsys, model, *texts)
        predicted[threshold] = [sorted(r["labels"]) for r in rows]
        assert [set(r) for r in rows] == [{"text", "labels", "scores"}] * 3
        for row in rows:
            probs = logits_of(model, row["text"]).sigmoid()
            assert row["scores"] == {TOPICS[i]: pytest.approx(float(p), abs=1e-5) for i, p in enumerate(probs)}
            assert sorted(row["labels"]) == sorted(TOPICS[i] for i, p in enumerate(probs) if p >= threshold)
    assert predicted[0.3] != predicted[0.7] and any(predicted[0.7]), "the threshold decides the labels"
    code, out, _ = run_predict(capsys, model, *texts)
    assert code == 0 and len(out) == 3 and all(line.endswith("\t" + t) for line, t in zip(out, texts))


def test_token_classification_lists_entities(models, capsys):
    model, text = models["token-classification"], "john works at acme in london"
    rows = run_predict_json(capsys, model, text)
    assert len(rows) == 1 and set(rows[0]) == {"text", "entities"} and rows[0]["text"] == text
    entities = rows[0]["entities"]
    assert entities, "the tiny model tags some words of this text"
    for entity in entities:
        assert set(entity) == {"entity", "word", "start", "end", "score"}
        assert entity["entity"] in {"PER", "LOC"}  # B-/I- tags merged into entities
        assert text[entity["start"]:entity["end"]] == entity["word"]
    code, out, _ = run_predict(capsys, model, text)
    assert code == 0 and out == [", ".join(f"{e['entity']}:{e['word']}" for e in entities) + "\t" + text]


# --- sentence pairs -----------------------------------------------------------------------------

def test_a_tab_makes_a_sentence_pair(models, capsys, tmp_path):
    model = models["text-classification"]
    pair, single = ("a man is playing", "a guitar song"), "the film was bad"
    expected = logits_of(model, *pair).softmax(-1)
    assert not torch.allclose(expected, logits_of(model, " ".join(pair)).softmax(-1), atol=1e-4), \
        "the check below could not tell a pair from the joined text"
    lines = tmp_path / "inputs.txt"
    lines.write_text(f"{pair[0]}\t{pair[1]}\n\n   \n{single}\n")
    rows = run_predict_json(capsys, model, "\t".join(pair), "--file", lines)
    assert [r.get("text_pair") for r in rows] == [pair[1], pair[1], None]
    for row in rows[:2]:
        assert row["text"] == pair[0]
        assert row["score"] == pytest.approx(float(expected.max()), abs=1e-5)
    assert rows[2]["text"] == single and "text_pair" not in rows[2]
    code, out, _ = run_predict(capsys, model, "\t".join(pair))
    assert code == 0 and out[0].endswith(f"\t{pair[0]}\t{pair[1]}")


def test_jsonl_file_and_stdin(models, capsys, tmp_path, monkeypatch):
    model = models["regression"]
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text(json.dumps({"text": "a man is playing", "text_pair": "a guitar song"}) + "\n\n"
                     + json.dumps({"text": "mary sings", "id": 7}) + "\n")
    rows = run_predict_json(capsys, model, "--file", jsonl)
    assert [(r["text"], r.get("text_pair")) for r in rows] == [("a man is playing", "a guitar song"),
                                                                ("mary sings", None)]
    assert rows[0]["value"] == pytest.approx(float(logits_of(model, "a man is playing", "a guitar song")[0]),
                                             rel=1e-4, abs=1e-5)
    monkeypatch.setattr("sys.stdin", io.StringIO("great movie\nthe film\tis bad\n"))
    rows = run_predict_json(capsys, model, "--file", "-", "--batch-size", "1")
    assert [(r["text"], r.get("text_pair")) for r in rows] == [("great movie", None), ("the film", "is bad")]
    assert all(math.isfinite(r["value"]) for r in rows)


def test_the_pyfunc_model_serves_every_input_shape(models, tmp_path):
    import pandas as pd

    from ftplat.tracking.pyfunc_model import TaskPipelineModel

    served = TaskPipelineModel()
    served.load_context(SimpleNamespace(artifacts={"hf_model": str(models["text-classification"])}))
    assert served.task.name == "text-classification"
    texts = served.predict(None, ["great movie", "awful film"])
    assert [set(p) for p in texts] == [{"label", "score"}] * 2
    pair = logits_of(models["text-classification"], "a man is playing", "a guitar song").softmax(-1)
    dicts = served.predict(None, [{"text": "great movie"}, {"text": "a man is playing", "text_pair": "a guitar song"}])
    frame = served.predict(None, pd.DataFrame({"text": ["great movie", "a man is playing"],
                                               "text_pair": [None, "a guitar song"]}))
    assert dicts == frame and dicts[0] == texts[0]
    assert dicts[1]["score"] == pytest.approx(float(pair.max()), abs=1e-5)
    assert served.predict(None, pd.DataFrame({"text": ["great movie"]}), params={"batch_size": 1}) == texts[:1]

    regression = TaskPipelineModel()
    regression.load_context(SimpleNamespace(artifacts={"hf_model": str(models["regression"])}))
    values = regression.predict(None, pd.DataFrame({"text": ["great movie", "awful film"]}))
    assert [set(v) for v in values] == [{"value"}] * 2
    assert values[0]["value"] == pytest.approx(float(logits_of(models["regression"], "great movie")[0]), rel=1e-4)
    with pytest.raises(ValueError, match="^input 2 is dict"):
        regression.predict(None, ["fine", {"txt": "typo"}])


# --- refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    ([], "no texts"),
    (["--file", "{empty}"], "no texts"),
    (["--file", "{missing}"], "cannot be read"),
    (["--file", "{bad_jsonl}"], "bad.jsonl line 3 is not valid JSON"),
    (["--file", "{no_text_jsonl}"], 'line 1 is not a JSON object with a non-empty "text"'),
    (["one\ttwo\tthree"], "argument 1 has more than one TAB"),
    (["fine", "--file", "{two_tabs}"], "two_tabs.txt line 2 has more than one TAB"),
    (["great", "--batch-size", "0"], "--batch-size is 0"),
    (["--model", "{nomodel}", "great"], "holds no config.json"),
    (["--model", "{badtask}", "great"], "does not name a task"),
])
def test_bad_input_exits_2_with_one_line(args, expected, models, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n\n{"text": "b"\n')
    (tmp_path / "nt.jsonl").write_text('["a list"]\n')
    (tmp_path / "two_tabs.txt").write_text("fine\na\tb\tc\n")
    (tmp_path / "nomodel").mkdir()
    badtask = tmp_path / "badtask"
    badtask.mkdir()
    (badtask / "config.json").write_text((models["text-classification"] / "config.json").read_text())
    (badtask / TASK_FILE).write_text('{"type": "summarization"}')
    paths = {"empty": tmp_path / "empty.txt", "missing": tmp_path / "missing.txt", "bad_jsonl": tmp_path / "bad.jsonl",
             "no_text_jsonl": tmp_path / "nt.jsonl", "two_tabs": tmp_path / "two_tabs.txt",
             "nomodel": tmp_path / "nomodel", "badtask": badtask, "token": models["token-classification"]}
    args = [a.format(**paths) for a in args]
    model = models["text-classification"]
    if args[:1] == ["--model"]:
        model, args = args[1], args[2:]
    code, out, err = run_predict(capsys, model, *args)
    assert code == 2
    assert out == []
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err


def test_a_tab_separates_a_pair_only_for_a_model_trained_on_pairs(models, tmp_path, capsys):
    """A review holding a TAB, given to a single-text model, is one text (it was a pair, and
    scored differently); a pair model refuses a line without its TAB; a model whose export
    does not say (older ones, models from elsewhere) reads a TAB as a pair, as before."""
    import shutil

    single, pair = tmp_path / "single", tmp_path / "pair"
    for folder, text_pair in ((single, False), (pair, True)):
        shutil.copytree(models["text-classification"], folder)
        (folder / TASK_FILE).write_text(json.dumps({"type": "text-classification", "text_pair": text_pair}))
    [row] = run_predict_json(capsys, single, "great\tmovie")
    assert row["text"] == "great\tmovie" and "text_pair" not in row
    [row] = run_predict_json(capsys, pair, "great\tmovie")
    assert (row["text"], row["text_pair"]) == ("great", "movie")
    code, _, err = run_predict(capsys, pair, "great movie")
    assert code == 2 and err == ["error: argument 1 has no TAB, but the model was trained on sentence pairs: give "
                                 "TEXT<TAB>TEXT_PAIR (or a .jsonl line with text and text_pair)"]
    (tmp_path / "pairs.jsonl").write_text('{"text": "great", "text_pair": "movie"}\n')
    code, _, err = run_predict(capsys, single, "--file", tmp_path / "pairs.jsonl")
    assert code == 2 and err[0].endswith("is a sentence pair (a JSON line's text_pair) but the model takes one text "
                                         "per input (trained on single texts)")
    # A JSON line's text is never split at its TAB; a pair model needs its text_pair
    (tmp_path / "tab.jsonl").write_text('{"text": "great\\tmovie", "text_pair": "fun"}\n')
    [row] = run_predict_json(capsys, pair, "--file", tmp_path / "tab.jsonl")
    assert (row["text"], row["text_pair"]) == ("great\tmovie", "fun")
    (tmp_path / "lone.jsonl").write_text('{"text": "great movie"}\n')
    code, _, err = run_predict(capsys, pair, "--file", tmp_path / "lone.jsonl")
    assert code == 2 and err == [f'error: --file {tmp_path / "lone.jsonl"} line 1 has no "text_pair", but the model '
                                 "was trained on sentence pairs"]
    [row] = run_predict_json(capsys, models["token-classification"], "john\tparis")  # one text, TAB and all
    assert row["text"] == "john\tparis"
    [row] = run_predict_json(capsys, models["text-classification"], "great\tmovie")  # not recorded: a pair
    assert row["text_pair"] == "movie"
