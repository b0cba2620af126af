"""Helpers shared by the benchmark scripts: the machine record, a validation split and the
plain-HF baseline Trainer."""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ftplat.ray_internals import WORKER_START_TIMEOUT_ENV

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
DEFAULT_MODEL = "../shared/models/all-MiniLM-L6-v2"
DEFAULT_DATA = "../shared/data/imdb"

# On a loaded machine a Train worker process can take more than Train V2's default 60 s to
# start (imports of torch and transformers), and the controller then retries forever. A
# local cluster started by these scripts inherits this environment.
os.environ.setdefault(WORKER_START_TIMEOUT_ENV, "900")


def build_machine_record() -> dict[str, Any]:
    """What ran the benchmark: command, cores, load, library versions, git commit."""
    import ray
    import torch
    import transformers

    try:
        import optuna
        optuna_version = optuna.__version__
    except ImportError:  # pragma: no cover
        optuna_version = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE, check=False).stdout.strip()
    except OSError:  # pragma: no cover
        commit = ""
    mem_gib = None
    if hasattr(os, "sysconf"):
        try:
            mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
        except (ValueError, OSError):  # pragma: no cover
            pass
    return {
        "command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
        "cpus": os.cpu_count(),
        "memory_gib": mem_gib,
        "machine": platform.machine(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "ray": ray.__version__,
        "transformers": transformers.__version__,
        "optuna": optuna_version,
        "git_commit": commit,
    }


def write_validation_split(source: str, dest: str, validation_rows: int, seed: int = 0) -> str:
    """``dest`` gets ``train.parquet`` (the train split minus ``validation_rows`` random rows),
    ``validation.parquet`` (those rows) and ``test.parquet`` (the untouched test split), so
    models are selected on reviews taken from train and the test reviews stay unseen."""
    os.makedirs(dest, exist_ok=True)
    marker = os.path.join(dest, f".split-{validation_rows}-{seed}")
    if os.path.exists(marker):
        return dest
    train = pq.read_table(os.path.join(source, "train.parquet"))
    order = np.random.default_rng(seed).permutation(train.num_rows)
    pq.write_table(train.take(np.sort(order[:validation_rows])), os.path.join(dest, "validation.parquet"))
    pq.write_table(train.take(np.sort(order[validation_rows:])), os.path.join(dest, "train.parquet"))
    test = os.path.join(dest, "test.parquet")
    if not os.path.exists(test):
        os.symlink(os.path.abspath(os.path.join(source, "test.parquet")), test)
    open(marker, "w").close()
    return dest


def read_pieces(results: str, pattern: str, hint: str) -> list[dict]:
    """Every piece record matching ``pattern`` in ``results``; exits naming ``hint`` when none."""
    pieces = []
    for path in sorted(glob.glob(os.path.join(results, pattern))):
        with open(path) as f:
            pieces.append(json.load(f))
    if not pieces:
        raise SystemExit(f"no pieces in {results}; {hint}")
    return pieces


def build_plain_trainer(job, data, output_dir: str, **trainer_kwargs):
    """A plain ``transformers`` Trainer set up as ftplat's worker sets up its own (the worker's
    ``build_trainer``: the same TrainingArguments builder, tokenizer, collator and metrics),
    without Ray: the baseline the overhead and HPO benchmarks compare ftplat with.

    ``data`` is the ``TokenizedData`` of ``build_tokenized_tables``. ``trainer_kwargs`` bring
    ``model`` or ``model_init``, made as a plain HF user makes them (``build_trainer`` seeds
    only a model it builds itself), and callbacks."""
    from ftplat.train.worker import build_trainer

    if "model" not in trainer_kwargs and "model_init" not in trainer_kwargs:
        raise TypeError("build_plain_trainer needs model= or model_init=")
    return build_trainer(job, train_table=data.train, eval_table=data.eval, output_dir=output_dir,
                         **trainer_kwargs)


def summarize(values: list[float | None]) -> dict[str, float] | None:
    """Median and spread (min, max) of the known values, and how many there were."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {"median": round(statistics.median(known), 4), "min": round(min(known), 4), "max": round(max(known), 4),
            "n": len(known)}


def run_json_process(cmd: list[str], source_root: str | None) -> dict[str, Any]:
    """Run ``cmd`` (a script's ``--one`` mode, printing one JSON line last) in a fresh process,
    with ``source_root`` (another checkout's ``platform/``) first on PYTHONPATH when given; the
    record gets the 1-minute load average at its start."""
    env = dict(os.environ)
    if source_root:
        env["PYTHONPATH"] = os.path.abspath(source_root) + os.pathsep + env.get("PYTHONPATH", "")
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"run failed ({source_root or 'this tree'}):\n{out.stderr[-3000:]}")
    record = json.loads(out.stdout.strip().splitlines()[-1])
    record["load_avg_at_start"] = round(load, 2)
    return record


def write_report(report: dict[str, Any], path: str | None) -> None:
    """Print the report's aggregate and, with ``--json PATH``, write the whole report there."""
    print(json.dumps(report["aggregate"], indent=2))
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2)


def parse_env(text: str) -> tuple[str, str]:
    """``--env KEY=VALUE`` of the benchmarks that set a variable in the cluster's environment."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def run_tiny_sweep(name: str, trials: int, *, tracking: bool = False):
    """A FIFO sweep of ``trials`` one-epoch trials of the test suite's tiny BERT (256 train / 64
    held-out synthetic rows, max_length 32, 1 CPU a worker; no tracking, or MLflow on a local
    sqlite file with ``tracking``), on its own local cluster; returns the summary, the sweep's
    wall seconds and each trial's timeline."""
    import tempfile
    import time
    from pathlib import Path

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.support.tiny_assets import write_sentiment_dataset, write_tiny_bert

    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    with tempfile.TemporaryDirectory(prefix=f"{name}-") as root:
        model = write_tiny_bert(Path(root) / "model")
        data = write_sentiment_dataset(Path(root) / "data", 256, 64)
        job, space = load_sweep_configs(None, None, [
            f"model.name_or_path={model}", f"data.source={data}", f"storage.storage_path={root}/storage",
            f"storage.sweep_name={name}", "data.max_length=32", "data.eval_split=test", "data.test_split=null",
            "training.num_train_epochs=1.0", f"search.num_samples={trials}",
            *([f"tracking.tracking_uri=sqlite:///{root}/mlflow.db"] if tracking else ["tracking.enabled=false"]),
            "search.seed=1", "search.algorithm=random", "search.scheduler={type: fifo}", "resources.cpus_per_worker=1",
            "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-4, high: 3.0e-2}}"])
        start = time.perf_counter()
        summary = run_sweep(job, space)
        wall = time.perf_counter() - start
        timelines = [read_trial_timeline(summary.sweep_path, t.trial_id) for t in summary.trials]
        return summary, wall, timelines


def read_trial_timeline(sweep_path: str, trial_id: str) -> dict | None:
    """Where a trial's wall went (``timeline_s`` of its driver's training record); None for a
    trial that wrote no record (stopped by the scheduler, or failed)."""
    from ftplat.layout import build_train_run_uri, build_trial_result_uri
    from ftplat.storage import path_exists, read_json

    uri = build_trial_result_uri(build_train_run_uri(sweep_path, trial_id))
    return read_json(uri).get("timeline_s") if path_exists(uri) else None


def write_random_bert_base(dest: str, vocab_size: int = 30522) -> str:
    """A bert-base-sized classifier (12 layers, hidden 768) with seeded random weights, saved
    as a model folder: throughput and load times do not need trained weights, and no hub."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=vocab_size, num_labels=2)).save_pretrained(dest)
    return dest


def write_bert_base(tokenizer_from: str, dest: str) -> str:
    """A bert-base-sized classifier with random weights (throughput does not need trained
    ones, and the GPU machine has no hub) and the tokenizer of ``tokenizer_from``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    write_random_bert_base(dest, vocab_size=len(tokenizer))
    tokenizer.save_pretrained(dest)
    return dest
