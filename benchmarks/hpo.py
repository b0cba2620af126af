"""HPO efficiency: best validation accuracy reached as a function of trial-epochs spent.

Five methods, the same search space, the same trial budget and the same data, model and
TrainingArguments (ftplat's one builder):

  ftplat_optuna_asha  ftplat's sweep (run_sweep): Optuna TPE proposes, ASHA stops weak trials
                      after their first evaluation (grace_period 1, reduction_factor 3)
  ftplat_optuna_asha_grace2
                      the same with grace_period 2: a trial is first judged after two
                      evaluations (slow starters survive; less is saved)
  ftplat_random       ftplat's sweep with ``algorithm: random`` (Tune's seeded random draws),
                      every trial runs all its epochs (FIFO)
  hf_optuna           plain ``transformers`` ``Trainer.hyperparameter_search(backend="optuna")``
                      in this process (TPE with the same seed, Optuna's default MedianPruner)
  hf_random           the same in-process HF search with Optuna's RandomSampler and no pruner:
                      random search without Ray's per-trial process starts (a cheaper stand-in
                      for ftplat_random on a loaded machine; the same trial-epoch accounting)

ftplat's TPE draws at random for its first max(2, trials // 4) trials (``search.startup_trials``)
and models the finished ones after that; ``hf_optuna`` keeps Optuna's default of 10 random
startup trials, which is what a user of ``hyperparameter_search`` gets (with 6 trials it is
random search plus the MedianPruner).

One evaluation per epoch, so a trial-epoch is one evaluation: for ftplat they are counted from
summary.json (each trial's evaluations), for HF by a callback. Every method selects on a
validation split taken from the IMDB train split (the test split is not touched).

Pieces, then the aggregate + plot. With the defaults (6 trials x 3 epochs, 256/256 reviews,
max_length 64) one piece took 5.5-12 minutes on 2 quiet CPU cores and --full 124 minutes:
  python benchmarks/hpo.py --method ftplat_optuna_asha --seed 0
  python benchmarks/hpo.py --method ftplat_random --seed 0
  python benchmarks/hpo.py --method hf_optuna --seed 0
  python benchmarks/hpo.py --aggregate          # benchmarks/results/hpo/summary.json + hpo.png
  python benchmarks/hpo.py --full               # every method x seeds 0 1 2 not yet done, then aggregate
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    DEFAULT_DATA, DEFAULT_MODEL, RESULTS, build_machine_record, build_plain_trainer, read_pieces,
    write_validation_split,
)

METHODS = ("ftplat_optuna_asha", "ftplat_optuna_asha_grace2", "ftplat_random", "hf_optuna", "hf_random")
ASHA_GRACE = {"ftplat_optuna_asha": 1, "ftplat_optuna_asha_grace2": 2}  # method -> grace_period
SEEDS = (0, 1, 2)
LABELS = {"ftplat_optuna_asha": "ftplat Optuna + ASHA",
          "ftplat_optuna_asha_grace2": "ftplat Optuna + ASHA, grace period 2", "ftplat_random": "ftplat random search",
          "hf_optuna": "HF Trainer.hyperparameter_search (optuna)",
          "hf_random": "random search, plain HF in-process"}
SPACE = {  # the same ranges for every method
    "training.learning_rate": (1.0e-5, 3.0e-4, True),
    "training.warmup_steps": (0.0, 0.2, False),
    "training.weight_decay": (0.0, 0.1, False),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--method", choices=METHODS, help="run one piece (with --seed)")
    what.add_argument("--full", action="store_true", help="run every method x --seeds not done yet, then aggregate")
    what.add_argument("--aggregate", action="store_true", help="only aggregate the pieces in --results")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--eval-size", type=int, default=256, help="validation reviews (taken from train)")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--threads", type=int, default=2, help="CPUs of the one worker (and torch threads)")
    p.add_argument("--concurrent", type=int, default=1,
                   help="ftplat trials at once, each with --threads / N CPUs (packing the same cores); "
                        "the plain HF search stays one trial at a time on --threads")
    p.add_argument("--warm-cluster", action="store_true",
                   help="start ftplat's local Ray cluster before its sweep's clock (as under `ray job submit`, "
                        "where the cluster is already up); default: the sweep starts it inside its wall")
    p.add_argument("--results", default=os.path.join(RESULTS, "hpo"))
    p.add_argument("--force", action="store_true", help="with --full: rerun pieces that exist")
    return p


def build_overrides(a: argparse.Namespace, method: str, seed: int, storage: str, data_dir: str) -> list[str]:
    params = ", ".join(
        f"{k}: {{type: {'loguniform' if log else 'uniform'}, low: {lo:.6e}, high: {hi:.6e}}}"
        for k, (lo, hi, log) in SPACE.items())
    out = [
        "tracking.enabled=false",
        f"model.name_or_path={a.model}", f"data.source={data_dir}", "data.eval_split=validation",
        # The data folder has a test split: scoring the winner on its 25,000 reviews (since
        # the validation protocol of #16) is not part of what these benchmarks compare.
        "data.test_split=null",
        f"data.max_length={a.max_length}", f"data.train_size={a.train_size}", f"data.eval_size={a.eval_size}",
        f"training.num_train_epochs={a.epochs}", "training.logging_steps=10",
        "training.per_device_train_batch_size=16", "training.per_device_eval_batch_size=64",
        "training.save_total_limit=1",
        f"resources.cpus_per_worker={a.threads // a.concurrent}", f"resources.max_concurrent_trials={a.concurrent}",
        # Logical CPUs for every trial's worker bundle: when ASHA stops a trial, Train V2's
        # PlacementGroupCleaner must remove that trial's worker placement group, and on a
        # host running several Ray clusters it fails ("Found multiple active Ray instances")
        # and the group leaks; with room for the leaks the next trials still start (only one
        # trial runs at a time, so the real cores are not oversubscribed).
        f"resources.local_num_cpus={a.threads * (a.trials + 1) + 1}",
        f"storage.storage_path={storage}", f"storage.sweep_name={method}-seed{seed}",
        f"search.parameters={{{params}}}", f"search.num_samples={a.trials}", f"search.seed={seed}",
    ]
    if method in ASHA_GRACE:
        out += ["search.algorithm=optuna",
                f"search.scheduler={{type: asha, grace_period: {ASHA_GRACE[method]}, reduction_factor: 3}}"]
    elif method == "ftplat_random":
        out += ["search.algorithm=random", "search.scheduler={type: fifo}"]
    else:
        out += ["search.algorithm=optuna", "search.scheduler={type: fifo}"]
    return out


def build_evaluations_from_summary(summary) -> list[dict]:
    """Evaluations of a sweep from its ``SweepSummary``, trial after trial: chronological for
    a sequential sweep (``--concurrent 1``); with packed trials, the order trials started in."""
    evals = []
    for i, trial in enumerate(summary.trials):
        for row in trial.history:
            evals.append({"trial": i, "trial_id": trial.trial_id, "epoch": row.get("epoch"),
                          "accuracy": row.get("eval_accuracy"), "hyperparameters": trial.hyperparameters})
    return evals


def run_ftplat(a, method: str, seed: int, data_dir: str) -> dict:
    import ray

    from ftplat.config.loading import load_sweep_configs
    from ftplat.runtime import run_ray_init
    from ftplat.tune.sweep import run_sweep
    from _common import read_trial_timeline

    with tempfile.TemporaryDirectory(prefix="ftplat-hpo-") as storage:
        job, space = load_sweep_configs(None, None, build_overrides(a, method, seed, storage, data_dir))
        # The same private cluster run_sweep would start; it then uses it and leaves it running.
        warm = a.warm_cluster and run_ray_init(job.resources)
        start = time.perf_counter()
        try:
            summary = run_sweep(job, space)
        finally:
            wall = time.perf_counter() - start
            if warm:
                ray.shutdown()
        # Where each trial's wall went (its driver's record; a trial ASHA stopped has none).
        timelines = {t.trial_id: read_trial_timeline(summary.sweep_path, t.trial_id) for t in summary.trials}
    trials = [{"trial_id": t.trial_id, "status": t.status, "num_evaluations": t.num_evaluations,
               "hyperparameters": t.hyperparameters, "best_accuracy": t.scores["all"],
               "wall_s": t.cost.get("wall_s"), "timeline_s": timelines[t.trial_id]}
              for t in summary.trials]
    return {"evaluations": build_evaluations_from_summary(summary), "trials": trials, "wall_s": round(wall, 1)}


def run_hf(a, method: str, seed: int, data_dir: str) -> dict:
    import optuna
    import torch
    from transformers import TrainerCallback

    from ftplat.config.loading import load_sweep_configs
    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.train.modeling import build_model

    torch.set_num_threads(a.threads)
    evals: list[dict] = []
    trials: list[dict] = []

    class Record(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            trials.append({"hyperparameters": {"training.learning_rate": args.learning_rate,
                                               "training.warmup_steps": args.warmup_steps,
                                               "training.weight_decay": args.weight_decay},
                           "num_evaluations": 0})

        def on_evaluate(self, args, state, control, metrics=None, **kw):
            trials[-1]["num_evaluations"] += 1
            evals.append({"trial": len(trials) - 1, "epoch": state.epoch, "accuracy": metrics["eval_accuracy"],
                          "hyperparameters": trials[-1]["hyperparameters"]})

    def hp_space(trial):
        return {k.split(".", 1)[1]: trial.suggest_float(k.split(".", 1)[1], lo, hi, log=log)
                for k, (lo, hi, log) in SPACE.items()}

    with tempfile.TemporaryDirectory(prefix="hf-hpo-") as out:
        job, _ = load_sweep_configs(None, None, build_overrides(a, method, seed, out, data_dir))
        data = build_tokenized_tables(job)
        trainer = build_plain_trainer(job, data, out, model_init=lambda trial=None: build_model(job),
                                      callbacks=[Record()])
        if method == "hf_random":
            search = {"sampler": optuna.samplers.RandomSampler(seed=seed), "pruner": optuna.pruners.NopPruner()}
        else:  # Optuna's defaults, as a user of hyperparameter_search gets them (MedianPruner)
            search = {"sampler": optuna.samplers.TPESampler(seed=seed)}
        start = time.perf_counter()
        best = trainer.hyperparameter_search(
            hp_space=hp_space, compute_objective=lambda m: m["eval_accuracy"], n_trials=a.trials,
            direction="maximize", backend="optuna", **search)
        wall = time.perf_counter() - start
    for t in trials:
        t["best_accuracy"] = max((e["accuracy"] for e in evals if trials[e["trial"]] is t), default=None)
    return {"evaluations": evals, "trials": trials, "wall_s": round(wall, 1),
            "hf_best_run": {"run_id": best.run_id, "objective": best.objective}}


def build_curve(evaluations: list[dict]) -> list[float]:
    """curve[k-1] = best accuracy after k trial-epochs."""
    best, curve = -math.inf, []
    for e in evaluations:
        if e["accuracy"] is not None:
            best = max(best, e["accuracy"])
        curve.append(best)
    return curve


def run_piece(a, method: str, seed: int) -> dict:
    data_dir = write_validation_split(a.data, os.path.join(tempfile.gettempdir(), "ftplat-bench-imdb"),
                                      validation_rows=2000, seed=0)
    machine = build_machine_record()
    start = time.perf_counter()
    result = run_hf(a, method, seed, data_dir) if method.startswith("hf_") else run_ftplat(a, method, seed, data_dir)
    curve = build_curve(result["evaluations"])
    piece = {"method": method, "seed": seed, "machine": machine,
             "config": {k: v for k, v in vars(a).items() if k not in ("full", "aggregate", "force")},
             "trial_epochs": len(curve), "best_accuracy": curve[-1] if curve else None, "curve": curve,
             "piece_wall_s": round(time.perf_counter() - start, 1),
             "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], **result}
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, f"{method}-seed{seed}.json"), "w") as f:
        json.dump(piece, f, indent=2)
    print(f"{method} seed {seed}: best {piece['best_accuracy']:.4f} after {piece['trial_epochs']} trial-epochs, "
          f"{piece['piece_wall_s']:.0f} s", flush=True)
    return piece


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


def aggregate(pieces: list[dict]) -> dict[str, Any]:
    """Per method: mean best accuracy, mean trial-epochs and the mean best-so-far curve; then
    the issue's goal, for each ASHA variant (``goal_by_method``; ``goal`` is grace period 1's):
    it reaches random search's best with at most half its trial-epochs (on the seed-mean
    curves, and per seed)."""
    by_method: dict[str, dict[int, dict]] = {}
    for p in pieces:
        by_method.setdefault(p["method"], {})[p["seed"]] = p
    methods = {}
    for m, seeds in sorted(by_method.items()):
        n = max(len(p["curve"]) for p in seeds.values())
        padded = [p["curve"] + [p["curve"][-1]] * (n - len(p["curve"])) for p in seeds.values()]
        bests = [p["best_accuracy"] for p in seeds.values()]
        methods[m] = {
            "seeds": sorted(seeds),
            "best_accuracy_mean": _mean(bests),
            "best_accuracy_min": min(bests), "best_accuracy_max": max(bests),
            "trial_epochs_mean": _mean([p["trial_epochs"] for p in seeds.values()]),
            "wall_s_mean": _mean([p["wall_s"] for p in seeds.values()]),
            "mean_curve": [_mean([c[k] for c in padded]) for k in range(n)],
        }
    # The random-search reference: ftplat's own random search, else the in-process one.
    ref = next((m for m in ("ftplat_random", "hf_random") if m in methods), None)
    goals = {m: build_goal(by_method, methods, m, ref) for m in ASHA_GRACE}
    return {"methods": methods, "goal": goals["ftplat_optuna_asha"], "goal_by_method": goals}


def build_goal(by_method: dict[str, dict[int, dict]], methods: dict[str, dict], asha_method: str,
               ref: str | None) -> dict[str, Any]:
    """Whether ``asha_method`` reaches the random-search reference's best within half its
    trial-epochs, on the seed-mean curves and per seed (only the statement when either is missing)."""
    goal: dict[str, Any] = {"statement": f"{LABELS[asha_method]} reaches random search's best accuracy "
                                         "with at most half of random search's trial-epochs"}
    if asha_method in methods and ref:
        asha, rnd = methods[asha_method], methods[ref]
        target, budget = rnd["best_accuracy_mean"], rnd["trial_epochs_mean"]
        reach = next((k + 1 for k, v in enumerate(asha["mean_curve"]) if v >= target - 1e-12), None)
        per_seed = {}
        for s in sorted(set(asha["seeds"]) & set(rnd["seeds"])):
            ra, rr = by_method[asha_method][s], by_method[ref][s]
            per_seed[s] = {"random_best": rr["best_accuracy"], "random_trial_epochs": rr["trial_epochs"],
                           "asha_best": ra["best_accuracy"], "asha_trial_epochs": ra["trial_epochs"],
                           "asha_trial_epochs_to_reach": next(
                               (k + 1 for k, v in enumerate(ra["curve"]) if v >= rr["best_accuracy"] - 1e-12), None)}
        goal.update({"random_reference": ref, "random_best_mean": target, "random_trial_epochs_mean": budget,
                     "half_budget": budget / 2,
                     "asha_trial_epochs_to_reach_mean_curve": reach,
                     "met_on_mean_curves": reach is not None and reach <= budget / 2,
                     "per_seed": per_seed,
                     "met_per_seed": {s: (v["asha_trial_epochs_to_reach"] is not None
                                          and v["asha_trial_epochs_to_reach"] <= v["random_trial_epochs"] / 2)
                                      for s, v in per_seed.items()}})
    return goal


def write_plot(pieces: list[dict], agg: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ftplat_optuna_asha": "tab:blue", "ftplat_optuna_asha_grace2": "tab:purple", "ftplat_random": "tab:orange", "hf_optuna": "tab:green",
              "hf_random": "tab:red"}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for p in pieces:
        xs = range(1, len(p["curve"]) + 1)
        ax.step(xs, p["curve"], where="post", color=colors.get(p["method"]), alpha=0.25, linewidth=1)
    for m, s in agg["methods"].items():
        xs = range(1, len(s["mean_curve"]) + 1)
        ax.step(xs, s["mean_curve"], where="post", color=colors.get(m), linewidth=2.2,
                label=f"{LABELS.get(m, m)} (mean of {len(s['seeds'])} seeds)")
    g = agg["goal"]
    if "random_best_mean" in g:
        ax.axhline(g["random_best_mean"], color=colors[g["random_reference"]], linestyle=":", linewidth=1)
        ax.axvline(g["half_budget"], color="grey", linestyle="--", linewidth=1,
                   label="half of random search's trial-epochs")
    ax.axhline(0.5, color="black", linewidth=0.8, alpha=0.5, label="chance (balanced classes)")
    ax.set_ylim(bottom=min(0.45, ax.get_ylim()[0]))
    ax.set_xlabel("trial-epochs spent (one evaluation each)")
    ax.set_ylabel("best validation accuracy so far")
    c = pieces[0]["config"]
    ax.set_title(f"HPO efficiency: MiniLM, {c['train_size']} train / {c['eval_size']} validation IMDB reviews, "
                 f"len {c['max_length']},\n{c['trials']} trials x up to {c['epochs']} epochs, 2 CPU cores", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_aggregate(results: str) -> dict:
    pieces = read_pieces(results, "*-seed*.json", "run --method ... --seed ... first")
    agg = aggregate(pieces)
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump(agg, f, indent=2)
    write_plot(pieces, agg, os.path.join(results, "hpo.png"))
    for m, s in agg["methods"].items():
        print(f"{m:20s} seeds {s['seeds']}: best {s['best_accuracy_mean']:.4f} (min {s['best_accuracy_min']:.4f}, "
              f"max {s['best_accuracy_max']:.4f}), {s['trial_epochs_mean']:.1f} trial-epochs, {s['wall_s_mean']:.0f} s")
    print(json.dumps(agg["goal_by_method"], indent=2))
    return agg


def main(argv=None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.concurrent < 1 or a.threads % a.concurrent:
        parser.error(f"--concurrent must divide --threads ({a.threads}), got {a.concurrent}")
    if a.method:
        run_piece(a, a.method, a.seed)
    elif a.full:
        for seed in a.seeds:
            for method in METHODS:
                if a.force or not os.path.exists(os.path.join(a.results, f"{method}-seed{seed}.json")):
                    run_piece(a, method, seed)
        run_aggregate(a.results)
    else:
        run_aggregate(a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
