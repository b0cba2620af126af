"""A real 4-trial Optuna sweep on a local Ray cluster with a tiny BERT, 3 epochs per trial,
save_total_limit 2 and a keep-top-1-trial retention policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray.train
from ray.tune import ExperimentAnalysis

from ftplat.config.loading import load_sweep_configs
from ftplat.scoring import SCOPES, compute_scope_scores
from ftplat.tune.sweep import run_sweep
from sweep_overrides import build_tiny_overrides

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sweep(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    storage = tmp_path_factory.mktemp("storage")
    job, space = load_sweep_configs(
        None, None, build_tiny_overrides(tiny_model_dir, sentiment_data_dir, storage, "tiny",
                                         "retention.keep_top_k_trials=1", "retention.keep_trial_latest=false")
    )
    summary = run_sweep(job, space).to_dict()
    return job, space, summary, Path(storage) / "tiny"


def test_summary_is_complete(sweep):
    job, space, summary, sweep_dir = sweep
    on_disk = json.loads((sweep_dir / "summary.json").read_text())
    assert on_disk["winner"] == summary["winner"]
    assert summary["num_trials"] == 4 and summary["status_counts"] == {"TERMINATED": 4}
    assert summary["scope"] == "last" and summary["objective"] == {"metric": "eval_accuracy", "mode": "max"}
    assert summary["data"]["train"]["rows"] == 2048 and summary["versions"]["ray"].startswith("2.60")
    # The state file Tune saved last, which a copy of the folder keeps (its mtimes it does not).
    assert summary["tune_state_file"] == sorted(p.name for p in sweep_dir.glob("experiment_state-*.json"))[-1]
    params = set(space.parameters)
    for trial in summary["trials"]:
        assert set(trial["hyperparameters"]) == params
        assert trial["num_evaluations"] == 3 and [r["epoch"] for r in trial["history"]] == [1.0, 2.0, 3.0]
        assert set(trial["scores"]) == set(SCOPES)
        assert trial["scores"] == compute_scope_scores([r["eval_accuracy"] for r in trial["history"]], "max")
        assert trial["best_checkpoint"]["exists"] and trial["error"] is None
        result = trial["train_result"]
        assert result["step_time"]["steps"] == result["global_step"] and result["step_time"]["step_ms_mean"] > 0
    # Optuna proposed four different settings
    assert len({t["hyperparameters"]["training.learning_rate"] for t in summary["trials"]}) == 4


def test_winner_is_the_argmax_under_every_scope(sweep):
    _, _, summary, sweep_dir = sweep
    analysis = ExperimentAnalysis(str(sweep_dir))
    created = sorted(analysis.trials, key=lambda t: int(t.experiment_tag.split("_", 1)[0]))
    assert [t["trial_id"] for t in summary["trials"]] == [t.trial_id for t in created]
    for scope in SCOPES:
        best_score = max(t["scores"][scope] for t in summary["trials"])
        tied = [t["trial_id"] for t in summary["trials"] if t["scores"][scope] == best_score]
        # Ray breaks ties in the order its experiment state stored the trials, which need not
        # be creation order; ftplat gives them to the trial created first.
        assert analysis.get_best_trial("eval_accuracy", "max", scope).trial_id in tied, scope
        assert summary["winners_by_scope"][scope] == tied[0], scope
    assert summary["winner"]["trial_id"] == summary["winners_by_scope"]["last"]
    assert summary["winner"]["score"] == max(t["scores"]["last"] for t in summary["trials"])


def test_every_report_carries_the_running_objective(sweep):
    _, _, summary, _ = sweep
    for trial in summary["trials"]:
        accs = [r["eval_accuracy"] for r in trial["history"]]
        for n, row in enumerate(trial["history"], start=1):
            assert row["objective"] == pytest.approx(compute_scope_scores(accs[:n], "max")["last"])
            assert row["training_iteration"] == n


def build_expected_hf_set(history, best_name, limit=2):
    """HF save_total_limit: the best is kept beside the most recent, `limit` in all."""
    names = [r["checkpoint_name"] for r in sorted(history, key=lambda r: r["step"])]
    recent = names[-limit:]
    return sorted(recent if best_name in recent else [best_name, *names[-(limit - 1):]])


def test_checkpoints_are_in_storage_under_the_retention_policy(sweep):
    job, _, summary, sweep_dir = sweep
    kept_total = 0
    for trial in summary["trials"]:
        run_dir = sweep_dir / f"train-{trial['trial_id']}"
        names = sorted(p.name for p in run_dir.glob("checkpoint-*"))
        best_name = Path(trial["best_checkpoint"]["path"]).name
        if trial["trial_id"] == summary["winner"]["trial_id"]:  # top-1 trial: its save_total_limit=2 set
            assert names == build_expected_hf_set(trial["history"], best_name)
        else:  # the others keep only their best (keep_trial_latest=false)
            assert names == [best_name]
        kept_total += len(names)
        # Ray's snapshot was pruned with the folders: the run still loads
        result = ray.train.Result.from_path(str(run_dir))
        assert sorted(Path(c.path).name for c, _ in result.best_checkpoints) == names
        best = Path(trial["best_checkpoint"]["path"])
        assert best.parent == run_dir
        for required in ("model.safetensors", "config.json", "trainer_state.json", "rng_state.pth", "tokenizer.json"):
            assert (best / required).is_file(), required
        # The trial completed: nothing resumes it, so retention dropped its optimizer state.
        assert not any((c / f).exists() for c in run_dir.glob("checkpoint-*") for f in ("optimizer.pt", "scheduler.pt"))
        # About one model per kept checkpoint (3x with AdamW's state); the tiny model's Trainer
        # state and Ray's run files are a fifth of it.
        assert trial["cost"]["storage_vs_model"] < 1.5 * len(names)
        state = json.loads((best / "trainer_state.json").read_text())
        assert state["global_step"] == trial["best_checkpoint"]["step"]
        best_acc = max(r["eval_accuracy"] for r in trial["history"])
        assert trial["best_checkpoint"]["eval_accuracy"] == best_acc
    assert kept_total == 2 + 3  # of the 12 checkpoints written


def test_sweep_name_cannot_be_reused_without_resume(sweep):
    job, space, _, _ = sweep
    # The sweep has finished: --resume would be refused too, so the message does not offer it.
    with pytest.raises(ValueError, match="already exists .*; it has finished: choose another storage.sweep_name"):
        run_sweep(job, space)


def test_exported_winner_reproduces_its_accuracy(sweep, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer

    from ftplat.cli.main import main as ftplat_main
    from ftplat.data.preparation import build_tokenized_tables, build_torch_dataset
    from ftplat.data.tokenizer import build_tokenizer
    from ftplat.train.arguments import build_training_arguments
    from ftplat.tasks import build_task

    job, _, summary, sweep_dir = sweep
    out = tmp_path / "export"
    assert ftplat_main(["export", str(sweep_dir), str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in out.iterdir()}
    assert not (out / "optimizer.pt").exists()
    assert "## Score under every scope" in (out / "README.md").read_text()

    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "neg", 1: "pos"}
    tables = build_tokenized_tables(job)
    tokenizer = build_tokenizer(job.model)
    trainer = Trainer(model=model, args=build_training_arguments(job, output_dir=str(tmp_path / "eval")),
                      eval_dataset=build_torch_dataset(tables.eval), processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=build_task(job).compute_metrics)
    recorded = summary["winner"]["best_checkpoint"]["eval_accuracy"]
    assert trainer.evaluate()["eval_accuracy"] == pytest.approx(recorded, abs=1e-9)

    capsys.readouterr()
    assert ftplat_main(["predict", str(out), "I hate this movie", "i love this movie"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(line.split("\t")[0] in {"neg", "pos"} for line in lines)
    assert ftplat_main(["export", str(sweep_dir), str(out)]) == 2  # never overwrites


def test_checkpoints_gc_dry_run_lists_every_folder(sweep, capsys):
    from ftplat.cli.main import main as ftplat_main

    _, _, summary, sweep_dir = sweep
    before = sorted(p.relative_to(sweep_dir) for p in sweep_dir.glob("train-*/checkpoint-*"))
    assert ftplat_main(["checkpoints", "gc", str(sweep_dir), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing deleted" in out and "0 delete" in out  # the sweep already applied its policy
    assert sorted(p.relative_to(sweep_dir) for p in sweep_dir.glob("train-*/checkpoint-*")) == before


def test_trial_larger_than_the_cluster_is_refused(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path):
    job, space = load_sweep_configs(None, None, build_tiny_overrides(
        tiny_model_dir, sentiment_data_dir, tmp_path, "too-big", "resources.num_workers=8"))
    with pytest.raises(ValueError, match=r"a trial needs 8.25 CPUs .* but the cluster has 4"):
        run_sweep(job, space)
    assert not (tmp_path / "too-big").exists()
