"""The exported model card as the hub reads it: its metadata block (read back with
``huggingface_hub.ModelCard``), no path of the training machine in it, and ``--push-to-hub``
refusing for real when the hub cannot be reached."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import ModelCard
from test_export_tasks import REGRESSION_DATA, build_sweep_config, write_sweep

from ftplat.checkpoints.card import build_card_data, build_public_name, build_public_text, build_weights_section
from ftplat.cli.main import main as ftplat_main
from ftplat.records import SweepSummary
from ftplat.tasks import TASK_FILE, build_task

#: A '/' that starts a path (not ``and/or``, ``s3://``, ``./x`` or ``<this directory>``).
ABSOLUTE = re.compile(r"(?<![\w:/.<~])~?/[\w.-]")
TEST = {"split": "test", "rows": 40, "trial_id": "t1", "checkpoint": "/somewhere/sweep/train-t1/checkpoint-20",
        "metrics": {"test_mse": 0.3125, "test_pearson": 0.75}}


def assert_no_machine_path(text: str, tmp_path: Path) -> None:
    assert str(tmp_path) not in text and str(Path.home()) + "/" not in text
    leaks = [line for line in text.splitlines() if ABSOLUTE.search(line)]
    assert not leaks, leaks


def export_local_sweep(tmp_path: Path, **summary) -> Path:
    """A regression sweep whose model and data are absolute local paths, as a job config may give."""
    config = build_sweep_config({"type": "regression"}, source=str(tmp_path / "data" / "sts-local"))
    config["job"]["model"]["name_or_path"] = str(tmp_path / "models" / "tiny-bert")
    sweep = write_sweep(tmp_path, "regression", sweep_config=config, metric="eval_mse", mode="min",
                        task="regression", data=REGRESSION_DATA, **summary)
    out = tmp_path / "out"
    assert ftplat_main(["export", str(sweep), str(out)]) == 0
    return out


def test_the_card_metadata_reads_back_with_huggingface_hub(tmp_path):
    out = export_local_sweep(tmp_path, test=TEST)
    card = ModelCard.load(out / "README.md")
    data = card.data
    assert data.library_name == "transformers"
    assert data.base_model is None, "a local base model is no hub id: the hub would refuse the card"
    assert data.datasets == ["sts-local"]
    assert data.pipeline_tag == build_task("regression").pipeline_task == "text-classification"
    assert data.tags == ["ftplat", "regression"]
    assert data.metrics == ["mse", "pearson"]
    assert data.model_name == "sts"
    results = {(r.dataset_split, r.metric_type): r for r in data.eval_results}
    assert set(results) == {("validation", "mse"), ("test", "mse"), ("test", "pearson")}
    assert results["validation", "mse"].metric_value == 0.25
    assert results["test", "mse"].metric_value == 0.3125 and results["test", "pearson"].metric_value == 0.75
    assert all(r.task_type == "text-classification" and r.dataset_type == "sts-local" for r in data.eval_results)
    # the markdown below the metadata is the card it was before
    assert card.text.lstrip().startswith("# sts: winner trial t1\n\n") and "## Selection and test" in card.text


def test_the_card_names_no_path_of_the_training_machine(tmp_path):
    error = f"FileNotFoundError: [Errno 2] No such file: '{tmp_path}/data/sts-local/test.csv'"
    out = export_local_sweep(tmp_path, test={"error": error})
    text = (out / "README.md").read_text()
    assert_no_machine_path(text, tmp_path)
    assert "fine-tuned by ftplat from `tiny-bert`" in text and "- source: `sts-local`" in text
    assert "- Test: failed: FileNotFoundError: [Errno 2] No such file: 'test.csv'" in text
    card = ModelCard.load(out / "README.md")
    assert [r.dataset_split for r in card.data.eval_results] == ["validation"], "a failed test has no score"


def test_hub_ids_stay_as_given(tmp_path):
    config = build_sweep_config({"type": "regression"}, source="mteb/stsbenchmark-sts", config_name="default")
    config["job"]["model"]["name_or_path"] = "google-bert/bert-base-uncased"
    sweep = write_sweep(tmp_path, "regression", sweep_config=config, task="regression", data=REGRESSION_DATA)
    assert ftplat_main(["export", str(sweep), str(tmp_path / "out")]) == 0
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert card.data.base_model == "google-bert/bert-base-uncased"
    assert card.data.datasets == ["mteb/stsbenchmark-sts"]
    assert {r.dataset_config for r in card.data.eval_results} == {"default"}
    assert "- Test: not recorded" in card.text and all(r.dataset_split != "test" for r in card.data.eval_results)


def test_public_names():
    assert build_public_name("bert-base-uncased") == "bert-base-uncased"
    assert build_public_name("org/model") == "org/model"
    assert build_public_name("/home/me/models/tiny-bert/") == "tiny-bert"
    assert build_public_name("./data/reviews.csv") == "reviews.csv"
    assert build_public_name("~/data/reviews") == "reviews"
    assert build_public_name("s3://bucket/data/reviews") == "reviews"
    assert build_public_name("/a/b/c") == "c", "more than one '/' is no repo id"
    assert build_public_text("held out of /tmp/x/train.csv and/or s3://b/k") == "held out of train.csv and/or s3://b/k"


def test_adapter_card_metadata_and_section(tmp_path):
    from test_export_tasks import build_summary_dict

    summary = SweepSummary.from_dict(build_summary_dict(tmp_path, task="regression", data=REGRESSION_DATA))
    local_base = str(tmp_path / "models" / "tiny-bert")
    weights = {"weights": "adapter", "base_model": local_base, "peft": {"method": "lora", "r": 8}}
    job = {"model": {"name_or_path": local_base}, "data": {"source": "glue"}}
    data = build_card_data(summary, summary.winner_trial(), build_task("regression"), job, weights)
    assert data.library_name == "peft" and data.tags == ["ftplat", "regression", "peft", "lora"]
    assert data.base_model is None and data.datasets == ["glue"]
    section = build_weights_section({**weights, "modules_to_save": ["classifier"]},
                                    "AutoModelForSequenceClassification")
    assert "on the frozen base model `tiny-bert`; `classifier` trained whole." in section
    # A causal LM's adapter leaves its LM head as the base has it: the card said the head trained
    lm = build_weights_section({**weights, "modules_to_save": []}, "AutoModelForCausalLM")
    assert "`tiny-bert`; every weight outside the adapter is the base model's." in lm and "trained whole" not in lm
    assert_no_machine_path(section, tmp_path)
    assert ('base = AutoModelForSequenceClassification.from_pretrained("<path to tiny-bert>", config=config, '
            'ignore_mismatched_sizes=True)') in section
    assert "<AutoModelFor...>" not in section
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    compile(code.replace("<this directory>", "d").replace("<path to tiny-bert>", "b"), "<card>", "exec")

    hub = {**weights, "weights": "merged", "base_model": "prajjwal1/bert-tiny"}
    data = build_card_data(summary, summary.winner_trial(), build_task("regression"),
                           {"model": {"name_or_path": "prajjwal1/bert-tiny"}}, hub)
    assert data.library_name == "transformers" and data.base_model == "prajjwal1/bert-tiny"
    assert data.tags == ["ftplat", "regression", "lora"] and data.datasets is None


def run_cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The real command in a fresh process: huggingface_hub reads HF_ENDPOINT/HF_HUB_OFFLINE at import."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return subprocess.run([sys.executable, "-m", "ftplat.cli.main", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env={**base, "HF_HOME": str(tmp_path / "hf-home"), "HF_TOKEN": "hf_not_a_token", **env})


def test_push_to_an_unreachable_hub_leaves_the_export_and_says_how_to_push_later(tmp_path):
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    done = run_cli(["export", "sweep", "out", "--push-to-hub", "me/sts", "--private"], tmp_path,
                   HF_ENDPOINT="http://127.0.0.1:9")
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "the export is complete at out" in errors[0] and "cannot be reached at http://127.0.0.1:9" in errors[0]
    assert errors[0].endswith("push it later with: hf upload --private --exclude ftplat_export.json me/sts out .")
    assert (tmp_path / "out" / "README.md").is_file() and (tmp_path / "out" / TASK_FILE).is_file()
    assert "Exported trial t1" in done.stdout


class Unauthorized(BaseHTTPRequestHandler):
    """A hub that refuses every token, as huggingface.co answers a bad one."""

    def _refuse(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": "Invalid credentials in Authorization header"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = _refuse

    def log_message(self, *args):
        pass


def test_push_with_a_refused_token_leaves_the_export_and_says_how_to_log_in(tmp_path):
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = run_cli(["export", "sweep", "out", "--push-to-hub", "me/sts"], tmp_path,
                       HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "the export is complete at out" in errors[0] and "the hub answered 401" in errors[0]
    assert "hf auth login" in errors[0] and errors[0].endswith("push it later with: hf upload --exclude ftplat_export.json me/sts out .")
    assert (tmp_path / "out" / "README.md").is_file()


def test_push_with_the_hub_offline_refuses_before_exporting(tmp_path):
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    done = run_cli(["export", "sweep", "out", "--push-to-hub", "me/sts"], tmp_path, HF_HUB_OFFLINE="1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --push-to-hub needs the Hugging Face Hub but HF_HUB_OFFLINE=1")
    assert not (tmp_path / "out").exists()


def test_private_needs_push_to_hub(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        ftplat_main(["export", str(tmp_path / "sweep"), str(tmp_path / "out"), "--private"])
    assert exc.value.code == 2 and "--private needs --push-to-hub REPO_ID" in capsys.readouterr().err


def test_export_takes_a_home_relative_path(tmp_path, monkeypatch):
    """A quoted ``~`` reaches ftplat unexpanded (the shell expands only a bare one)."""
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert ftplat_main(["export", "~/sweep", "~/out"]) == 0
    assert (tmp_path / "out" / TASK_FILE).is_file() and not (tmp_path / "~").exists()
    assert json.loads((tmp_path / "out" / "ftplat_export.json").read_text())["trial"]["trial_id"] == "t1"


def test_class_counts_are_named_after_the_jobs_labels():
    from ftplat.checkpoints.card import build_role_line

    stats = {"split": "train", "rows": 5, "label_counts": {"0": 2, "1": 3}}
    assert build_role_line("train", stats, {0: "negative", 1: "positive"}) == \
        "- train: split `train`, 5 rows, label counts {'negative': 2, 'positive': 3}"
    assert build_role_line("train", stats) == "- train: split `train`, 5 rows, label counts {'0': 2, '1': 3}"
