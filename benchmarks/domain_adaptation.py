"""Domain adaptation measured on real data: masked-LM on unlabelled IMDB reviews, then the same
IMDB classification sweep from the adapted and from the original model (the CPU profile).

1. ``jobs/configs/masked_lm_imdb_unsup_cpu.yaml`` + its search space: MiniLM continues masked-LM
   pretraining on unlabelled reviews (``../shared/data/imdb_unsup``), selected on the masked-token
   loss of held-out reviews. The masked-LM perplexity on those held-out blocks is measured
   before (the original MiniLM, evaluated in this process with the sweep's own tokenized data and
   collator) and after (the winner's last evaluation).
2. The winner is exported (a plain model folder with its MLM head).
3. ``jobs/configs/imdb_cpu.yaml`` + ``search_spaces/imdb_cpu.yaml`` run twice with equal budgets,
   the same rows and the same search seed: from the original MiniLM and from the export. Each
   winner's held-out test accuracy (5,000 test reviews) is reported side by side.

  python benchmarks/domain_adaptation.py                 # about 30 min on 2 cores
  python benchmarks/domain_adaptation.py --mlm search.num_samples=1 --cls search.num_samples=2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, build_machine_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MLM = (REPO / "jobs/configs/masked_lm_imdb_unsup_cpu.yaml", REPO / "search_spaces/masked_lm_imdb_unsup_cpu.yaml")
CLS = (REPO / "jobs/configs/imdb_cpu.yaml", REPO / "search_spaces/imdb_cpu.yaml")


def run_evaluate_original(job) -> dict[str, float]:
    """The masked-LM metrics of ``job``'s model before any adaptation, on the sweep's own
    held-out blocks (the same seeded hold-out and collator the trials evaluate with)."""
    import torch

    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.train.worker import build_trainer

    torch.set_num_threads(int(job.resources.cpus_per_worker))
    tables = build_tokenized_tables(job)
    with tempfile.TemporaryDirectory(prefix="ftplat-mlm-before-") as out:
        metrics = build_trainer(job, train_table=None, eval_table=tables.eval, output_dir=out).evaluate()
    return {k: float(v) for k, v in metrics.items() if k in ("eval_loss", "eval_perplexity", "eval_accuracy")}


def build_after(summary) -> dict[str, float]:
    trial = summary.winner_trial()
    last = trial.history[-1] if trial and trial.history else {}
    return {k: last.get(k) for k in ("eval_loss", "eval_perplexity", "eval_accuracy")}


def run_classification(model: str, storage: str, name: str, overrides: list[str]) -> dict:
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    job, space = load_sweep_configs(CLS[0], CLS[1], [f"model.name_or_path={model}", f"storage.storage_path={storage}",
                                                    f"storage.sweep_name={name}", "tracking.enabled=false", *overrides])
    start = time.perf_counter()
    summary = run_sweep(job, space)
    test = (summary.test or {}).get("metrics") or {}
    return {"model": model, "sweep_wall_s": round(time.perf_counter() - start, 1),
            "validation_accuracy": summary.winner.score if summary.winner else None,
            "winner": summary.winner.hyperparameters if summary.winner else None,
            "test_accuracy": test.get("test_accuracy"), "test_rows": (summary.test or {}).get("rows"),
            "trials": [{"hyperparameters": t.hyperparameters, "validation_accuracy": t.scores.get("last")}
                       for t in summary.trials]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mlm", nargs="*", default=[], help="key=value overrides of the masked-LM sweep")
    p.add_argument("--cls", nargs="*", default=[], help="key=value overrides of both classification sweeps")
    p.add_argument("--results", default=os.path.join(RESULTS, "domain_adaptation"))
    a = p.parse_args(argv)
    os.makedirs(a.results, exist_ok=True)

    from ftplat.checkpoints.export import run_export
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    report = {"machine": build_machine_record()}
    with tempfile.TemporaryDirectory(prefix="ftplat-domain-") as storage:
        job, space = load_sweep_configs(MLM[0], MLM[1], [f"storage.storage_path={storage}", "storage.sweep_name=mlm",
                                                         "tracking.enabled=false", *a.mlm])
        before = run_evaluate_original(job)
        print(f"masked-LM before: {json.dumps(before)}", flush=True)
        start = time.perf_counter()
        mlm = run_sweep(job, space)
        after = build_after(mlm)
        report["masked_lm"] = {"data": mlm.data, "sweep_wall_s": round(time.perf_counter() - start, 1),
                               "before": before, "after": after,
                               "winner": mlm.winner.hyperparameters if mlm.winner else None}
        print(f"masked-LM after: {json.dumps(after)}", flush=True)
        adapted = os.path.join(storage, "adapted-export")
        run_export(os.path.join(storage, "mlm"), adapted)
        original = str(job.model.name_or_path)
        report["classification"] = {
            "original": run_classification(original, storage, "from-original", a.cls),
            "adapted": run_classification(adapted, storage, "from-adapted", a.cls),
        }
    report["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    with open(os.path.join(a.results, "summary.json"), "w") as f:
        json.dump(report, f, indent=2)
    c = report["classification"]
    ppl = (before.get("eval_perplexity"), after.get("eval_perplexity"))
    print(f"perplexity {ppl[0]} -> {ppl[1]}; test accuracy original {c['original']['test_accuracy']} vs adapted "
          f"{c['adapted']['test_accuracy']}", flush=True)
    ok = all(isinstance(v, float) and math.isfinite(v) for v in (c["original"]["test_accuracy"],
                                                                 c["adapted"]["test_accuracy"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
