"""The winner's test score at 1 thread (one packed worker's CPUs, before d8e0e83) and at 2
threads (the CPUs the finished trials held, since d8e0e83): the product's own scoring task,
`run_score_checkpoint`, on a checkpoint of the README's main command, interleaved.

    python score_threads.py --checkpoint /tmp/ab/repo/ftplat_results/ab-c1-1/train-4f358bb5/checkpoint-50 \
        --test-size 1000 --repeats 3 --json score_threads.json

Run from the repository root (the job config's ../shared paths are relative to it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import ray

from ftplat.config.loading import load_sweep_configs
from ftplat.data.preparation import build_tokenized_tables
from ftplat.train.checkpoint_score import run_score_checkpoint


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", required=True)
    args = p.parse_args()
    job, _ = load_sweep_configs("jobs/configs/imdb_cpu.yaml", None, [f"data.test_size={args.test_size}"])
    tables = build_tokenized_tables(job).tables
    ray.init(num_cpus=2, include_dashboard=False)
    data_ref = ray.put(tables)
    task = ray.remote(run_score_checkpoint)
    runs = []
    for i in range(args.repeats):
        for threads in (1, 2):
            load = os.getloadavg()[0]
            start = time.perf_counter()
            metrics = ray.get(task.options(num_cpus=threads).remote(
                {"job": job.model_dump(), "checkpoint": args.checkpoint, "data_ref": [data_ref], "threads": threads}))
            runs.append({"repeat": i, "threads": threads, "wall_s": round(time.perf_counter() - start, 2),
                         "test_runtime": metrics["test_runtime"], "test_accuracy": metrics["test_accuracy"],
                         "load_1m": load})
            print(runs[-1], flush=True)
    summary = {t: {k: statistics.median(r[k] for r in runs if r["threads"] == t) for k in ("wall_s", "test_runtime")}
               for t in (1, 2)}
    with open(args.json, "w") as f:
        json.dump({"command": vars(args), "runs": runs, "median": summary}, f, indent=2)
    print(summary)


if __name__ == "__main__":
    main()
