"""What the MLflow runs of a sweep show: child runs without transformers' defaults, scratch paths
or a second copy of the searched values; a parent with the searched ranges instead of their
unused base values; the winner marked; a report whose axes follow the search space; and a
registered model with a signature, pinned requirements and an input example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_assets import write_tiny_bert

from ftplat.tracking.params import (build_axis_scale, build_default_training_args, build_hf_params,
                                    build_parent_params)
from ftplat.tracking.pyfunc_model import build_pip_requirements


def build_resolved_args(tmp_path: Path, **given) -> dict:
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(tmp_path / "scratch-t1"), **given).to_dict()


def test_child_params_keep_what_tells_trials_apart(tmp_path):
    resolved = build_resolved_args(tmp_path, learning_rate=3e-4, weight_decay=0.05, num_train_epochs=2,
                                   eval_strategy="epoch", save_strategy="epoch", logging_steps=8,
                                   run_name="train-t1", label_smoothing_factor=0.1)
    params = build_hf_params(resolved, build_default_training_args(),
                             ["training.learning_rate", "model.peft.r", "training.hf_args.label_smoothing_factor"])
    # scratch paths and names differ in every trial: never a param
    assert not {"hf.output_dir", "hf.logging_dir", "hf.run_name"} & set(params)
    # searched values are logged once, by the trial driver, under their own names
    assert "hf.learning_rate" not in params and "hf.label_smoothing_factor" not in params
    # changed, or key to reading a run, whatever their value
    assert params["hf.weight_decay"] == 0.05 and params["hf.num_train_epochs"] == 2
    assert params["hf.eval_strategy"] == "epoch" and params["hf.seed"] == 42
    assert params["hf.logging_steps"] == 8  # logging counts steps
    assert "hf.save_steps" not in params and "hf.eval_steps" not in params  # saving and evaluation are per epoch
    assert not [k for k in params if k.startswith(("hf.hub_", "hf.fsdp", "hf.ddp_", "hf.push_to_hub"))]
    assert len(params) < 30, sorted(params)


def test_child_params_keep_step_counts_of_step_strategies(tmp_path):
    resolved = build_resolved_args(tmp_path, save_strategy="steps", save_steps=50)
    params = build_hf_params(resolved, build_default_training_args(), [])
    assert params["hf.save_steps"] == 50 and params["hf.save_strategy"] == "steps"


def test_reading_the_defaults_leaves_the_training_process_state_alone():
    # rank 0 reads them in on_train_begin: an instance of TrainingArguments would reset
    # accelerate's state under the Trainer that is training
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    build_default_training_args.cache_clear()
    assert build_default_training_args()["learning_rate"] == 5e-05
    assert accelerator.distributed_type is not None


SPACE = {
    "scope": "last", "objective": {"metric": "eval_accuracy", "mode": "max"}, "num_samples": 4, "seed": 3,
    "scheduler": {"type": "fifo"},
    "parameters": {"training.learning_rate": {"type": "loguniform", "low": 2e-05, "high": 0.0002},
                   "training.weight_decay": {"type": "uniform", "low": 0.0, "high": 0.1},
                   "model.peft.r": {"type": "choice", "values": [8, 16]}},
}


def test_parent_params_hold_ranges_not_unused_base_values():
    job = {"training": {"learning_rate": 5e-05, "weight_decay": 0.0, "num_train_epochs": 2.0},
           "model": {"name_or_path": "tiny", "peft": {"r": 4, "alpha": 16}}}
    params = build_parent_params(job, SPACE)
    assert params["search.training.learning_rate"] == "loguniform(2e-05, 0.0002)"
    assert params["search.training.weight_decay"] == "uniform(0.0, 0.1)"
    assert params["search.model.peft.r"] == "choice([8, 16])"
    assert not {"job.training.learning_rate", "job.training.weight_decay", "job.model.peft.r"} & set(params)
    assert params["job.training.num_train_epochs"] == 2.0 and params["job.model.peft.alpha"] == 16
    assert params["search.scope"] == "last" and params["search.objective"] == "eval_accuracy (max)"


@pytest.mark.parametrize("dist, scale", [
    ({"type": "loguniform", "low": 1e-5, "high": 1e-3}, "log"),
    ({"type": "qloguniform", "low": 1e-5, "high": 1e-3}, "log"),
    ({"type": "int", "low": 8, "high": 512, "log": True}, "log"),
    ({"type": "uniform", "low": 0.001, "high": 0.3}, "linear"),  # wide spread, still uniform
    ({"type": "int", "low": 1, "high": 4}, "linear"),
    ({"type": "choice", "values": [8, 16]}, "categorical"),
    (None, "linear"),
])
def test_axis_follows_the_distribution_not_the_spread(dist, scale):
    assert build_axis_scale(dist) == scale


def build_summary(sweep: Path, checkpoint: Path) -> dict:
    def trial(tid, lr, wd, r, score):
        return {"trial_id": tid, "status": "TERMINATED", "train_run_path": str(sweep / f"train-{tid}"),
                "hyperparameters": {"training.learning_rate": lr, "training.weight_decay": wd, "model.peft.r": r},
                "scores": {"last": score},
                "history": [{"training_iteration": 1, "step": 4, "epoch": 1.0, "eval_accuracy": score}],
                "cost": {"wall_s": 80.0, "cpus": 1.25, "gpus": 0.0, "cpu_seconds": 100.0, "gpu_seconds": 0.0,
                         "storage_bytes": 4096 if tid == "t2" else 0}}

    ckpt = {"path": str(checkpoint), "exists": True, "step": 4, "epoch": 1.0, "eval_accuracy": 0.75}
    return {"sweep_name": "legible", "sweep_path": str(sweep), "objective": {"metric": "eval_accuracy", "mode": "max"},
            "scope": "last", "metric_for_best_model": "eval_accuracy", "greater_is_better": True,
            "trials": [{**trial("t1", 3e-5, 0.002, 8, 0.5)}, {**trial("t2", 1.5e-4, 0.09, 16, 0.75),
                                                              "best_checkpoint": ckpt}],
            "winner": {"trial_id": "t2", "score": 0.75, "hyperparameters": {}, "best_checkpoint": ckpt},
            "cost": {"cpu_seconds": 200.0, "gpu_seconds": 0.0, "trial_wall_s": 160.0, "storage_bytes": 5000,
                     "storage_files": 9}}


def test_report_axes_and_colours_follow_the_space_and_the_winner(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from ftplat.records import SweepSummary
    from ftplat.tracking.report import OTHER_COLOUR, WINNER_COLOUR, run_write_report_figure

    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    summary = SweepSummary.from_dict(build_summary(tmp_path, tmp_path / "ckpt"))
    run_write_report_figure(summary, str(tmp_path / "r.png"), SPACE["parameters"])
    lr, wd, r, curves = figures[0].axes
    assert (lr.get_xscale(), wd.get_xscale()) == ("log", "linear")
    assert [t.get_text() for t in r.get_xticklabels()] == ["8", "16"]
    assert r.collections[0].get_offsets()[:, 0].tolist() == [0, 1]  # t1 took 8, t2 (drawn last) 16
    from matplotlib.colors import to_rgba

    assert [tuple(c) for c in lr.collections[0].get_facecolors()] == [to_rgba(OTHER_COLOUR), to_rgba(WINNER_COLOUR)]
    lines = {line.get_label(): line for line in curves.get_lines()}
    assert to_rgba(lines["t2 (winner)"].get_color()) == to_rgba(WINNER_COLOUR)
    assert lines["t2 (winner)"].get_linewidth() > lines["t1"].get_linewidth()
    assert to_rgba(lines["t1"].get_color()) == to_rgba(OTHER_COLOUR)


def test_pins_are_the_installed_versions_without_local_labels():
    versions = {"torch": "2.13.0+cpu", "peft": "0.18.0"}
    pins = build_pip_requirements(uses_peft=True, read_version=lambda name: versions.get(name, "1.2.3"))
    assert "torch==2.13.0" in pins and "peft==0.18.0" in pins and "transformers==1.2.3" in pins
    assert "peft==0.18.0" not in build_pip_requirements(uses_peft=False, read_version=lambda name: "0.18.0")


def test_registered_winner_is_marked_signed_and_pinned(tmp_path):
    import mlflow
    from importlib.metadata import version

    from ftplat.checkpoints.task_file import run_write_task_file
    from ftplat.config.schema import TrackingConfig
    from ftplat.records import SweepSummary
    from ftplat.tracking.report import run_finish_sweep, scoped_tracking_uri
    from ftplat.tracking.runs import build_client, run_start_parent, run_start_trial

    sweep = tmp_path / "sweep"
    checkpoint = write_tiny_bert(sweep / "train-t2" / "checkpoint-4")
    run_write_task_file(str(checkpoint), {"type": "text-classification"})
    summary_dict = build_summary(sweep, checkpoint)
    (sweep / "sweep_config.json").write_text(json.dumps({"job": {"model": {"name_or_path": "tiny"}, "data": {}},
                                                         "search_space": SPACE}))
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment_name="legible")
    tracking = run_start_parent(cfg, sweep_name="legible", sweep_path=str(sweep), params={}, config_json={},
                                dashboard_url=None)
    run_ids = {t["trial_id"]: run_start_trial(tracking, trial_id=t["trial_id"], run_uri=t["train_run_path"],
                                              params=t["hyperparameters"]) for t in summary_dict["trials"]}
    summary = SweepSummary.from_dict(summary_dict)
    assert run_finish_sweep(tracking, summary, registered_model_name="legible") is None

    client = build_client(tracking["tracking_uri"])
    winner, loser = client.get_run(run_ids["t2"]), client.get_run(run_ids["t1"])
    assert winner.data.tags["ftplat.winner"] == "true" and "ftplat.winner" not in loser.data.tags
    # What each trial and the sweep cost, as metrics MLflow can compare and sum.
    assert {k: v for k, v in winner.data.metrics.items() if k.startswith("cost.")} == {
        "cost.cpu_seconds": 100.0, "cost.gpu_seconds": 0.0, "cost.wall_s": 80.0, "cost.storage_bytes": 4096.0}
    parent = client.get_run(tracking["parent_run_id"]).data.metrics
    assert (parent["cost.cpu_seconds"], parent["cost.trial_wall_s"], parent["cost.storage_bytes"]) == (200.0, 160.0, 5000.0)
    assert winner.data.tags["ftplat.registered_model"] == "legible"
    assert winner.data.tags["ftplat.registered_model_version"] == "1"
    mv = client.get_model_version("legible", "1")
    assert mv.tags["ftplat.winner_run_id"] == run_ids["t2"]

    with scoped_tracking_uri(tracking["tracking_uri"]):
        info = mlflow.models.get_model_info("models:/legible/1")
        model = mlflow.pyfunc.load_model("models:/legible/1")
        requirements = Path(mlflow.pyfunc.get_model_dependencies("models:/legible/1")).read_text().split()
    signature = info.signature
    assert signature is not None
    # No input schema: MLflow would enforce it before predict reads the input (below).
    assert signature.inputs is None
    assert {"label", "score"} <= set(signature.outputs.input_names())
    assert signature.params.to_dict()[0]["name"] == "batch_size"
    assert f"transformers=={version('transformers')}" in requirements
    assert f"mlflow=={version('mlflow')}" in requirements
    assert any(r.startswith("torch==") for r in requirements) and "torch" not in requirements
    assert info.saved_input_example_info is not None
    good, dull = "i love this movie", "a dull tedious film, boring and long"
    rows = model.predict([good, dull])
    assert len(rows) == 2 and all(set(r) == {"label", "score"} for r in rows)
    # A table's text column is read wherever it stands (an unnamed string schema made MLflow
    # keep the first column: the title was classified), and a dict of columns is columns.
    import pandas as pd

    assert rows[0] != rows[1], "the check below needs the two texts told apart"
    assert model.predict(pd.DataFrame({"title": [dull] * 2, "text": [good] * 2, "id": [1, 2]})) == [rows[0]] * 2
    assert model.predict({"text": [good, dull]}) == rows

    # ftplat travels in the model: a fresh process loads the model's copy of the package
    # (MLflow puts the model's code first on sys.path), not the one installed here.
    with scoped_tracking_uri(tracking["tracking_uri"]):
        local = mlflow.artifacts.download_artifacts("models:/legible/1", dst_path=str(tmp_path / "served"))
    assert (Path(local) / "code" / "ftplat" / "tracking" / "pyfunc_model.py").is_file()
    # a model from code (the file that names the model object), not a pickled object
    assert (Path(local) / "pyfunc_code.py").is_file() and not list(Path(local).glob("**/*.pkl"))
    served = subprocess.run([sys.executable, "-c", (
        "import sys, mlflow.pyfunc\n"
        f"model = mlflow.pyfunc.load_model({local!r})\n"
        "print(model.predict(['i love this movie'])[0]['label'], sys.modules['ftplat'].__file__)")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-2000:]
    assert "Add type hints" not in served.stderr  # MLflow's advice for PythonModel classes it may wrap
    label, package = served.stdout.split()[-2:]
    assert label == rows[0]["label"]
    assert Path(package).is_relative_to(Path(local) / "code" / "ftplat")


def test_a_trial_run_ends_finished_when_it_trained_to_its_own_end_whatever_its_length():
    """A searched epoch count makes trials of different lengths: a short one that trained to its
    end is FINISHED, a trial ASHA stopped (no training record) KILLED."""
    from ftplat.records import TrialRecord
    from ftplat.tracking.report import build_trial_status

    def record(status, train_result):
        return TrialRecord.from_dict({"trial_id": "t", "status": status, "hyperparameters": {}, "scores": {},
                                      "history": [{"step": 10, "eval_accuracy": 0.5}], "train_result": train_result},
                                     "eval_accuracy")

    assert build_trial_status(record("TERMINATED", {"global_step": 10})) == "FINISHED"
    assert build_trial_status(record("TERMINATED", None)) == "KILLED"
    assert build_trial_status(record("ERROR", None)) == "FAILED"


def test_pyfunc_inputs_read_columns_as_mlflows_rest_server_passes_them():
    """``{"inputs": {"text": [...]}}`` reaches predict as a dict of numpy arrays."""
    import numpy as np

    from ftplat.tracking.pyfunc_model import build_pyfunc_inputs

    assert build_pyfunc_inputs({"text": np.array(["a", "b"])}) == ["a", "b"]
    assert build_pyfunc_inputs({"text": np.array(["a"]), "text_pair": np.array(["b"])}) == [{"text": "a",
                                                                                             "text_pair": "b"}]


def test_the_model_refuses_inputs_unlike_what_it_was_trained_on():
    """As predict does: a pair to a single-text model, a lone text to a pair model (the
    registered folder's ftplat_task.json says which); a model that does not say takes both."""
    from ftplat.tasks import build_task

    pair = {"text": "a man plays", "text_pair": "someone plays"}
    with pytest.raises(ValueError, match=r"^input 2 is a sentence pair \(text and text_pair\), but the model takes "
                                         r"one text per input$"):
        build_task({"type": "text-classification", "text_pair": False}).check_pair_inputs(["a text", pair])
    with pytest.raises(ValueError, match=r"^input 1 is one text, but the model was trained on sentence pairs"):
        build_task({"type": "regression", "text_pair": True}).check_pair_inputs(["a text", pair])
    build_task({"type": "text-classification"}).check_pair_inputs(["a text", pair])
    with pytest.raises(ValueError, match="input 1 is a sentence pair"):
        build_task({"type": "token-classification"}).check_pair_inputs([pair])


def test_pyfunc_inputs_are_numbered_from_1_as_the_pair_check_numbers_them():
    from ftplat.tracking.pyfunc_model import build_pyfunc_inputs

    with pytest.raises(ValueError, match=r"^input 2 is int: give a text"):
        build_pyfunc_inputs(["a text", 7])


def test_pyfunc_inputs_under_other_column_names_are_refused_naming_text():
    """No guessing which column holds the texts: a table's first column was a title."""
    import pandas as pd

    from ftplat.tracking.pyfunc_model import build_pyfunc_inputs

    with pytest.raises(ValueError, match=r"columns \['review', 'title'\] and no 'text'; name the column"):
        build_pyfunc_inputs(pd.DataFrame({"title": ["Great"], "review": ["a dull and tedious film"]}))
    with pytest.raises(ValueError, match=r"the input has columns \['review'\] and no 'text'"):
        build_pyfunc_inputs({"review": ["a dull film"]})
    # One column (MLflow's frame of a list of texts) and a text column anywhere are read
    assert build_pyfunc_inputs(pd.DataFrame(["a", "b"])) == ["a", "b"]
    assert build_pyfunc_inputs(pd.DataFrame({"title": ["t"], "text": ["a"]})) == ["a"]


def test_a_causal_lm_of_several_prompt_columns_serves_a_table_of_them_joined_as_trained():
    """Dolly's [instruction, context]: a table in the training schema lost its context (the
    first column was read), and context-first generated from the context alone."""
    import pandas as pd

    from ftplat.tasks import build_task
    from ftplat.tracking.pyfunc_model import build_pyfunc_inputs

    task = build_task({"type": "causal-lm", "prompt_columns": ["instruction", "context"]})
    table = pd.DataFrame({"context": ["The snow is white.", ""], "instruction": ["What color is snow?", "Name a color."]})
    assert build_pyfunc_inputs(table, task) == ["What color is snow?\n\nThe snow is white.", "Name a color."]
    assert build_pyfunc_inputs({"instruction": ["Hi?"], "context": [None]}, task) == ["Hi?"]
    with pytest.raises(ValueError, match=r"no 'text' \(or the prompt columns \['instruction', 'context'\]\)"):
        build_pyfunc_inputs(pd.DataFrame({"instruction": ["a"], "extra": ["b"]}), task)
