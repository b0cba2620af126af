"""Data at scale (issue #18): the sweep driver's tokenization, its peak memory and its table.

``build_tokenized_tables`` (what every sweep runs once in its driver) on IMDB train repeated
to ``--rows`` rows at max_length 160, each run in a fresh process so its peak resident set
(``ru_maxrss``) is its own. With ``--compare SRC`` the same runs use another ftplat source
tree too (a checkout's ``platform/`` folder, e.g. the commit before a change), interleaved
(this tree, SRC, this tree, SRC, ...), ``--repeats`` times each.

Reported per source tree: wall seconds and peak RSS (median [min, max]), and the table's bytes
in Arrow (what goes into Ray's object store and what every worker maps).

  python benchmarks/data_scale.py --rows 200000 --repeats 3 --compare /tmp/before/platform --json /tmp/data_scale.json

``--synthetic --sweep`` instead runs a whole one-trial sweep (4 optimizer steps) on short
synthetic reviews and reports the sweep driver's peak RSS (the issue's 1M-row goal: < 2 GiB):

  python benchmarks/data_scale.py --synthetic --sweep --rows 1000000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="../shared/models/all-MiniLM-L6-v2")
    p.add_argument("--data", default="../shared/data/imdb")
    p.add_argument("--rows", type=int, default=200_000, help="train rows (IMDB train repeated)")
    p.add_argument("--max-length", type=int, default=160)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compare", help="another ftplat source root (a checkout's platform/ folder)")
    p.add_argument("--synthetic", action="store_true",
                   help="short synthetic reviews (about 25 words) instead of IMDB repeated")
    p.add_argument("--sweep", action="store_true",
                   help="run a whole one-trial sweep (4 optimizer steps) and report the sweep driver's peak RSS")
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: run once on this data folder
    return p


def write_repeated_imdb(source: str, dest: str, rows: int) -> str:
    """``dest/train.parquet``: IMDB train repeated to ``rows`` rows; ``dest/test.parquet``: 1,000 test rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    train = pq.read_table(os.path.join(source, "train.parquet"))
    copies = -(-rows // train.num_rows)
    pq.write_table(pa.concat_tables([train] * copies).slice(0, rows), os.path.join(dest, "train.parquet"))
    pq.write_table(pq.read_table(os.path.join(source, "test.parquet")).slice(0, 1000),
                   os.path.join(dest, "test.parquet"))
    return dest


def write_synthetic(dest: str, rows: int, seed: int = 0) -> str:
    """``rows`` short random reviews (25 words of a 2,000-word vocabulary) with random labels."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(2000)])
    for split, n in (("train", rows), ("test", 1000)):
        picks = words[rng.integers(0, len(words), size=(n, 25))]
        texts = [" ".join(row) for row in picks]
        pq.write_table(pa.table({"text": texts, "label": rng.integers(0, 2, size=n)}),
                       os.path.join(dest, f"{split}.parquet"))
    return dest


def run_one(a: argparse.Namespace) -> dict:
    """In this process: tokenize and measure (the parent reads the JSON line printed last)."""
    from ftplat.config.loading import load_sweep_configs
    from ftplat.data.preparation import build_tokenized_tables

    overrides = [f"model.name_or_path={a.model}", f"data.source={a.one}", f"data.max_length={a.max_length}",
                 "data.eval_split=test", "data.test_split=null", "tracking.enabled=false"]
    if a.sweep:
        return run_one_sweep(a, overrides)
    job, _ = load_sweep_configs(None, None, overrides)
    start = time.perf_counter()
    data = build_tokenized_tables(job)
    wall = time.perf_counter() - start
    train = data.train
    return {"wall_s": round(wall, 2), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "train_rows": train.num_rows, "train_table_bytes": train.nbytes,
            "schema": {f.name: str(f.type) for f in train.schema}}


def run_one_sweep(a: argparse.Namespace, overrides: list[str]) -> dict:
    """A one-trial sweep of 4 optimizer steps on the whole train split, on a private local
    cluster; the peak RSS is this process's: the sweep driver's."""
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    with tempfile.TemporaryDirectory() as storage:
        job, space = load_sweep_configs(None, None, [
            *overrides, "data.eval_size=256", "training.max_steps=4", "training.eval_strategy=steps",
            "training.eval_steps=4", "training.save_strategy=steps", "training.save_steps=4",
            "search.num_samples=1", "resources.cpus_per_worker=1", f"storage.storage_path={storage}",
            "search.parameters={training.learning_rate: {type: choice, values: [5.0e-5]}}"])
        start = time.perf_counter()
        summary = run_sweep(job, space)
        wall = time.perf_counter() - start
    return {"wall_s": round(wall, 2), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "train_rows": summary.data["train"]["rows"], "train_table_bytes": 0,
            "tokenize_s": summary.data["seconds"], "status": summary.trials[0].status, "schema": {}}


def run_in_process(a: argparse.Namespace, data_dir: str, source_root: str | None) -> dict:
    from _common import run_json_process

    return run_json_process([sys.executable, os.path.abspath(__file__), "--one", data_dir, "--model",
                             os.path.abspath(a.model), "--max-length", str(a.max_length),
                             *(["--sweep"] if a.sweep else [])], source_root)


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a)))
        return 0
    from _common import build_machine_record, summarize, write_report

    machine = build_machine_record()
    trees = {"this tree": None, **({f"compare ({a.compare})": a.compare} if a.compare else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as data_dir:
        if a.synthetic:
            write_synthetic(data_dir, a.rows)
        else:
            write_repeated_imdb(a.data, data_dir, a.rows)
        for i in range(a.repeats):
            for name, root in trees.items():
                runs[name].append(run_in_process(a, data_dir, root))
                r = runs[name][-1]
                print(f"{i + 1}/{a.repeats} {name}: {r['wall_s']} s, peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB, "
                      f"table {r['train_table_bytes'] / 2**30:.3f} GiB", flush=True)
    report = {"config": {k: v for k, v in vars(a).items() if k != "one"}, "machine": machine,
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], "runs": runs,
              "aggregate": {name: {"wall_s": summarize([r["wall_s"] for r in rs]),
                                   "peak_rss_gib": summarize([round(r["peak_rss_bytes"] / 2**30, 3) for r in rs]),
                                   "train_table_gib": round(rs[0]["train_table_bytes"] / 2**30, 3),
                                   "schema": rs[0]["schema"]} for name, rs in runs.items()}}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
