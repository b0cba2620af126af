"""Regression on real data: IMDB reviews and their 1-10 star ratings, MiniLM on the CPU profile.

Runs the shipped example (``jobs/configs/regression_imdb_ratings.yaml`` with
``search_spaces/regression_imdb_ratings.yaml``: trials selected on validation MSE over reviews
held out of train; the winner scored once on test reviews) and sets the winner's test scores
beside constant predictions on the same test rows: the train mean (the MSE-optimal constant)
and the train median (the MAE-optimal one). A constant has no rank order, so its Pearson and
Spearman correlations are undefined (reported as null); any positive correlation is learned.

  python benchmarks/regression.py                      # 3 two-epoch trials, about 13 min on 2 cores
  python benchmarks/regression.py search.num_samples=2 # any key=value override of the sweep
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, build_machine_record  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(REPO, "jobs", "configs", "regression_imdb_ratings.yaml")
SPACE = os.path.join(REPO, "search_spaces", "regression_imdb_ratings.yaml")


def build_constant_baselines(train_labels, test_labels) -> dict[str, dict[str, float | None]]:
    """Test MSE and MAE of predicting the train mean and the train median for every review."""
    import numpy as np
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    train, test = np.asarray(train_labels, dtype=float), np.asarray(test_labels, dtype=float)
    out = {}
    for name, value in (("train_mean", float(train.mean())), ("train_median", float(np.median(train)))):
        pred = np.full_like(test, value)
        out[name] = {"prediction": round(value, 4), "test_mse": round(float(mean_squared_error(test, pred)), 4),
                     "test_mae": round(float(mean_absolute_error(test, pred)), 4),
                     "test_pearson": None, "test_spearman": None}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("overrides", nargs="*", help="key=value overrides of the example sweep")
    p.add_argument("--results", default=os.path.join(RESULTS, "regression"))
    a = p.parse_args(argv)
    os.makedirs(a.results, exist_ok=True)

    from ftplat.config.loading import load_sweep_configs
    from ftplat.data.preparation import TEST, TRAIN, build_tokenized_tables
    from ftplat.tune.sweep import run_sweep

    machine = build_machine_record()
    with tempfile.TemporaryDirectory(prefix="ftplat-regression-") as storage:
        job, space = load_sweep_configs(JOB, SPACE, [f"storage.storage_path={storage}", "storage.sweep_name=ratings",
                                                     "tracking.enabled=false", *a.overrides])
        # The rows the sweep trains and is tested on (the same seeded draws as inside run_sweep).
        tables = build_tokenized_tables(job).tables
        start = time.perf_counter()
        summary = run_sweep(job, space)
        wall = time.perf_counter() - start
    test = summary.test or {}
    report = {
        "machine": machine,
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "sweep_wall_s": round(wall, 1),
        "data": summary.data,
        "winner": {"trial_id": summary.winner.trial_id, "hyperparameters": summary.winner.hyperparameters,
                   "validation_mse": summary.winner.score} if summary.winner else None,
        "trials": [{"trial_id": t.trial_id, "hyperparameters": t.hyperparameters, "scores": t.scores}
                   for t in summary.trials],
        "test": test,
        "baselines": build_constant_baselines(tables[TRAIN]["labels"].to_pylist(), tables[TEST]["labels"].to_pylist()),
    }
    with open(os.path.join(a.results, "summary.json"), "w") as f:
        json.dump(report, f, indent=2)
    metrics = test.get("metrics") or {}
    print(f"winner test: mse {metrics.get('test_mse')}, mae {metrics.get('test_mae')}, "
          f"pearson {metrics.get('test_pearson')}, spearman {metrics.get('test_spearman')} on {test.get('rows')} "
          f"reviews; constant baselines {json.dumps(report['baselines'])}; sweep {wall:.0f} s", flush=True)
    return 0 if metrics else 1


if __name__ == "__main__":
    sys.exit(main())
