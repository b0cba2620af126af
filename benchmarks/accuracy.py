"""Accuracy of the exported winner on IMDB test reviews never used for selection.

1. An ftplat sweep (run_sweep, Optuna) trains on a stratified subset of IMDB train and
   selects trials and checkpoints on the product's validation protocol: 2,000 train reviews
   held out (data.validation.holdout, stratified), of which it uses --eval-size. After the
   sweep the product scores the winner once on --test-size stratified IMDB *test* reviews
   (summary.test), compared with the seed recipe's 0.8996 (bert-base-uncased, all 25,000
   train reviews, max_length 160, 1 epoch, GPU).
2. ``ftplat export SWEEP OUT`` writes the winner as a Hugging Face model directory, and the
   exported model classifies the same test reviews here, outside ftplat (a check that the
   export is the model that was scored).

  python benchmarks/accuracy.py                  # the affordable default (3.3 min on 2 quiet CPU cores)
  python benchmarks/accuracy.py --full           # 4 trials on 4,000 reviews, max_length 256
  python benchmarks/accuracy.py --plot-only      # redraw benchmarks/results/accuracy/accuracy.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DEFAULT_DATA, DEFAULT_MODEL, RESULTS, build_machine_record  # noqa: E402

RECIPE = {"model": "bert-base-uncased (110M parameters)", "train_reviews": 25000, "max_length": 160,
          "epochs": 1, "test_accuracy": 0.8996, "hardware": "GPU", "source": "../shared/seeds/002_*.txt"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--train-size", type=int, default=1000)
    p.add_argument("--eval-size", type=int, default=300, help="validation reviews (from train) that select")
    p.add_argument("--test-size", type=int, default=2000, help="held-out IMDB test reviews")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--first-point", default="1.5e-4,0.1,0.01",
                   help="learning_rate,warmup_steps,weight_decay of the first trial, or 'hpo': the best "
                        "evaluation's hyperparameters in benchmarks/results/hpo/*.json")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--full", action="store_true")
    p.add_argument("--plot-only", action="store_true")
    p.add_argument("--results", default=os.path.join(RESULTS, "accuracy"))
    return p


def build_first_point_from_hpo(results: str) -> str:
    """``lr,warmup,wd`` of the best evaluation over every HPO benchmark piece in ``results``;
    of equal accuracies, the first in piece file-name order (glob's own order varies)."""
    import glob

    best = None
    for path in sorted(glob.glob(os.path.join(results, "*-seed*.json"))):
        with open(path) as f:
            for e in json.load(f)["evaluations"]:
                if e["accuracy"] is not None and (best is None or e["accuracy"] > best["accuracy"]):
                    best = e
    if best is None:
        raise SystemExit(f"--first-point hpo: no HPO results in {results}")
    hp = best["hyperparameters"]
    return ",".join(str(hp[f"training.{k}"]) for k in ("learning_rate", "warmup_steps", "weight_decay"))


def build_overrides(a, storage: str, data_dir: str) -> list[str]:
    if a.first_point == "hpo":
        a.first_point = build_first_point_from_hpo(os.path.join(RESULTS, "hpo"))
    lr, warmup, wd = (float(x) for x in a.first_point.split(","))
    return [
        "tracking.enabled=false",
        f"model.name_or_path={a.model}", f"data.source={data_dir}", "data.validation.holdout=2000",
        f"data.max_length={a.max_length}", f"data.train_size={a.train_size}", f"data.eval_size={a.eval_size}",
        f"data.test_size={a.test_size}",
        f"training.num_train_epochs={a.epochs}", "training.logging_steps=20", "training.save_total_limit=1",
        "training.per_device_train_batch_size=16", "training.per_device_eval_batch_size=64",
        f"resources.cpus_per_worker={a.threads}", "resources.max_concurrent_trials=1",
        f"storage.storage_path={storage}", "storage.sweep_name=accuracy",
        "search.parameters={training.learning_rate: {type: loguniform, low: 3.0e-5, high: 3.0e-4}, "
        "training.warmup_steps: {type: uniform, low: 0.0, high: 0.2}, "
        "training.weight_decay: {type: uniform, low: 0.0, high: 0.1}}",
        f"search.num_samples={a.trials}", "search.seed=0",
        f"search.points_to_evaluate=[{{training.learning_rate: {lr:.6e}, training.warmup_steps: {warmup:.6e}, "
        f"training.weight_decay: {wd:.6e}}}]",
    ]


def run_test_eval(model_dir: str, data_dir: str, size: int, max_length: int, threads: int, seed: int) -> dict:
    """Accuracy of ``model_dir`` on the stratified test subset the sweep scored (``seed`` is
    the job's data.subset_seed, so these are the same rows)."""
    import numpy as np
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ftplat.data.preparation import build_stratified_indices

    torch.set_num_threads(threads)
    test = pq.read_table(os.path.join(data_dir, "test.parquet"))
    labels = np.asarray(test.column("label").to_pylist())
    idx = build_stratified_indices(labels, size, seed)
    texts = [test.column("text")[int(i)].as_py() for i in idx]
    labels = labels[idx]
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    preds = []
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), 64):
            batch = tok(texts[i:i + 64], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            preds += model(**batch).logits.argmax(-1).tolist()
    seconds = time.perf_counter() - start
    correct = int((np.asarray(preds) == labels).sum())
    return {"rows": len(labels), "label_counts": {int(k): int(v) for k, v in zip(*np.unique(labels, return_counts=True))},
            "accuracy": correct / len(labels), "correct": correct, "max_length": max_length,
            "seconds": round(seconds, 1)}


def write_plot(report: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["ftplat winner\n(validation)", "ftplat winner\n(2,000 test reviews)", "seed recipe\n(bert-base, test)"]
    values = [report["winner"]["validation_accuracy"], report["test"]["accuracy"], RECIPE["test_accuracy"]]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    bars = ax.bar(names, values, color=["tab:gray", "tab:blue", "tab:orange"])
    for b, v in zip(bars, values):
        ax.text(b.get_x() + b.get_width() / 2, v + 0.005, f"{v:.4f}", ha="center", fontsize=9)
    c = report["config"]
    ax.set_ylim(0.5, 1.0)
    ax.set_ylabel("accuracy")
    ax.set_title(f"MiniLM-L6, {c['train_size']} train reviews, len {c['max_length']}, {c['epochs']:g} epoch, "
                 "2 CPU cores vs\nbert-base, 25,000 reviews, len 160, 1 epoch, GPU", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    os.makedirs(a.results, exist_ok=True)
    out_json = os.path.join(a.results, "summary.json")
    if a.plot_only:
        with open(out_json) as f:
            write_plot(json.load(f), os.path.join(a.results, "accuracy.png"))
        return 0
    if a.full:
        a.train_size, a.eval_size, a.max_length, a.trials = 4000, 1000, 256, 4

    from ftplat.cli.main import main as ftplat_main
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    data_dir = a.data
    machine = build_machine_record()
    with tempfile.TemporaryDirectory(prefix="ftplat-accuracy-") as storage:
        job, space = load_sweep_configs(None, None, build_overrides(a, storage, data_dir))
        start = time.perf_counter()
        summary = run_sweep(job, space)
        sweep_wall = time.perf_counter() - start
        export_dir = os.path.join(storage, "export")
        cmd = ["export", os.path.join(storage, "accuracy"), export_dir]
        if ftplat_main(cmd) != 0:
            raise SystemExit("ftplat export failed")
        with open(os.path.join(export_dir, "ftplat_export.json")) as f:
            exported = json.load(f)
        test = run_test_eval(export_dir, data_dir, a.test_size, a.max_length, a.threads, job.data.subset_seed)
    w = summary.winner_trial()
    report = {
        "machine": machine,
        "config": {k: v for k, v in vars(a).items() if k not in ("plot_only",)},
        "sweep_wall_s": round(sweep_wall, 1),
        "trials": [{"trial_id": t.trial_id, "hyperparameters": t.hyperparameters, "scores": t.scores,
                    "train_samples_per_s": (t.train_result or {}).get("train_samples_per_second")}
                   for t in summary.trials],
        "winner": {"trial_id": w.trial_id, "hyperparameters": w.hyperparameters,
                   "validation_accuracy": (w.best_checkpoint.value if w.best_checkpoint
                                           and w.best_checkpoint.metric == "eval_accuracy" else None),
                   "exported_checkpoint": os.path.basename(exported["trial"]["best_checkpoint"]["path"])},
        "data": summary.data,
        "test_in_sweep": summary.test,
        "test": test,
        "recipe": RECIPE,
        "difference_to_recipe": round(test["accuracy"] - RECIPE["test_accuracy"], 4),
    }
    with open(out_json, "w") as f:
        json.dump(report, f, indent=2)
    write_plot(report, os.path.join(a.results, "accuracy.png"))
    print(f"winner {w.trial_id}: validation {report['winner']['validation_accuracy']}, "
          f"test {test['accuracy']:.4f} on {test['rows']} reviews (in the sweep: "
          f"{(summary.test or {}).get('metrics', {}).get('test_accuracy')}; recipe {RECIPE['test_accuracy']}), "
          f"sweep {sweep_wall:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
