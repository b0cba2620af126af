"""Evaluation off the training path: Ray Train V2's validation tasks against HF's in-loop evaluation.

One-worker Train runs of the same HF fine-tuning (real IMDB reviews, the offline MiniLM or, with
``--use-gpu``, a random bert-base at bf16), saving ``--evals`` checkpoints, each evaluated on the
same held-out reviews, three ways, interleaved (in-loop, in-loop on all, off-path, in-loop,
...), ``--repeats`` rounds on one local cluster:

* ``inloop``: the Trainer evaluates at each save (``eval_strategy="steps"``), training waits;
  the worker has ``--worker-cpus`` (and its GPU share).
* ``inloop_all``: the same, the worker also given what the validation tasks get (their CPUs as
  torch threads, the whole GPU): in-loop evaluation at equal resources.
* ``offpath``: the Trainer only saves; each checkpoint is reported with ``validation=True`` and
  Train's ``ValidationConfig`` evaluates it in a separate Ray task (its own CPUs or GPU share,
  ``--validation-cpus`` / ``--validation-gpus``) while training goes on. Ray 2.60 runs one such
  task at a time and gives the metrics only to its checkpoint manager (not to Tune).

Per run: ``fit()``'s wall, ``Trainer.train()``'s wall inside the worker, when the last
evaluation's metrics existed (seconds after ``fit()`` started), and each checkpoint's
``eval_accuracy``. The first checkpoint's must agree between ``inloop`` and ``offpath`` (same
seed, same threads, same steps: both paths evaluated the same model). Later ones may not: each
in-loop evaluation's DataLoader draws its base seed from torch's global generator, so the
dropout of every later step differs from a run that never evaluates in the loop.

  python benchmarks/eval_offpath.py --repeats 3 --json /tmp/eval_offpath.json
  python benchmarks/eval_offpath.py --use-gpu --repeats 3 --json /tmp/eval_offpath_gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import DEFAULT_DATA, DEFAULT_MODEL, build_machine_record, summarize, write_bert_base, write_report  # noqa: E402

MODES = ("inloop", "inloop_all", "offpath")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help=f"model folder with its tokenizer (default {DEFAULT_MODEL}; with --use-gpu a random bert-base)")
    p.add_argument("--data", default=DEFAULT_DATA, help="IMDB parquet folder (hub schema)")
    p.add_argument("--train-rows", type=int, default=512)
    p.add_argument("--eval-rows", type=int, default=512)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=64, help="optimizer steps a run")
    p.add_argument("--evals", type=int, default=4, help="checkpoints (and evaluations) a run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--use-gpu", action="store_true", help="the worker and the validation tasks on the GPU, bf16")
    p.add_argument("--worker-cpus", type=float, default=1, help="the worker's CPUs (its torch threads, rounded)")
    p.add_argument("--validation-cpus", type=float, default=1, help="each validation task's CPUs")
    p.add_argument("--validation-gpus", type=float, default=None,
                   help="each validation task's GPU share (default 0.5 with --use-gpu, the worker taking the other half)")
    p.add_argument("--json", help="write the whole report here")
    return p


def _pick(labels, start: int, rows: int):
    """``rows`` row numbers, half of each label, from position ``start`` of a seeded order."""
    import numpy as np

    rng = np.random.default_rng(0)
    picked = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[start:start + rows // 2] for c in (0, 1)])
    rng.shuffle(picked)
    return picked


def write_tokenized(a: argparse.Namespace, model: str, dest: str) -> tuple[dict[str, str], str]:
    """Train and held-out reviews (stratified, seeded), tokenized once, as .npz files every
    process of the local cluster reads; the held-out rows come from ``test.parquet``, or, when
    the folder has none (the GPU machine's sample of IMDB train), from train rows not trained on."""
    import numpy as np
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    train = pq.read_table(os.path.join(a.data, "train.parquet"))
    test_file = os.path.join(a.data, "test.parquet")
    held_out = (pq.read_table(test_file), 0, "test split") if os.path.exists(test_file) else (
        train, a.train_rows // 2, "train split, rows not trained on")
    paths = {}
    for split, (table, start, rows) in (("train", (train, 0, a.train_rows)), ("test", (*held_out[:2], a.eval_rows))):
        labels = np.asarray(table.column("label").to_pylist())
        picked = _pick(labels, start, rows)
        texts = [table.column("text")[int(i)].as_py() for i in picked]
        enc = tokenizer(texts, truncation=True, max_length=a.max_length, padding="max_length", return_tensors="np")
        paths[split] = os.path.join(dest, f"{split}.npz")
        np.savez(paths[split], input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels[picked])
    return paths, held_out[2]


def _dataset(path: str):
    import numpy as np
    import torch

    arrays = dict(np.load(path))
    return [{k: torch.as_tensor(v[i]) for k, v in arrays.items()} for i in range(len(arrays["labels"]))]


def _accuracy(pred):
    import numpy as np

    return {"accuracy": float((np.argmax(pred.predictions, -1) == pred.label_ids).mean())}


def _arguments(cfg: dict, output_dir: str, evaluate: bool):
    from transformers import TrainingArguments

    every = cfg["steps"] // cfg["evals"]
    return TrainingArguments(
        output_dir=output_dir, max_steps=cfg["steps"], per_device_train_batch_size=cfg["batch"],
        per_device_eval_batch_size=cfg["batch"] * 2, learning_rate=5e-5, seed=0, data_seed=0,
        eval_strategy="steps" if evaluate else "no", eval_steps=every, save_strategy="steps", save_steps=every,
        save_only_model=True, logging_strategy="no", report_to=[], disable_tqdm=True,
        bf16=cfg["gpu"], use_cpu=not cfg["gpu"], dataloader_num_workers=0)


def train_fn(cfg: dict) -> None:
    """The worker: plain HF fine-tuning, each save reported to Train (with ``validation`` off
    the path); its own timings written to ``cfg['timings']``."""
    import ray.train
    import torch
    from transformers import AutoModelForSequenceClassification, Trainer, TrainerCallback, set_seed

    torch.set_num_threads(cfg["threads"])
    offpath = cfg["mode"] == "offpath"
    pending = {}

    class Report(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            pending.update(metrics or {}, evaluated_at=time.time())

        def on_save(self, args, state, control, **kwargs):
            folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            metrics = {"step": state.global_step, **pending}
            pending.clear()
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder), validation=offpath)

    with tempfile.TemporaryDirectory() as out:
        set_seed(0)  # the classification head is drawn here, before the Trainer seeds
        model = AutoModelForSequenceClassification.from_pretrained(cfg["model"], num_labels=2)
        trainer = Trainer(model=model, args=_arguments(cfg, out, evaluate=not offpath),
                          train_dataset=_dataset(cfg["train"]), eval_dataset=_dataset(cfg["test"]),
                          compute_metrics=_accuracy, callbacks=[Report()])
        start = time.time()
        trainer.train()
        with open(cfg["timings"], "w") as f:
            json.dump({"train_s": time.time() - start, "train_started_at": start}, f)


def validate(checkpoint, cfg: dict) -> dict:
    """A validation task: the checkpoint's model on the held-out reviews, as the Trainer
    evaluates in the loop (same arguments, batch and metric)."""
    import torch
    from transformers import AutoModelForSequenceClassification, Trainer

    torch.set_num_threads(cfg["validation_threads"])
    start = time.time()
    with checkpoint.as_directory() as folder, tempfile.TemporaryDirectory() as out:
        model = AutoModelForSequenceClassification.from_pretrained(folder)
        trainer = Trainer(model=model, args=_arguments(cfg, out, evaluate=True), eval_dataset=_dataset(cfg["test"]),
                          compute_metrics=_accuracy)
        metrics = trainer.evaluate()
    return {**metrics, "validation_s": time.time() - start, "evaluated_at": time.time()}


def run_one(cfg: dict, mode: str, storage: str, index: int) -> dict:
    import ray.train
    from ray.train import RunConfig, ScalingConfig, ValidationConfig, ValidationTaskConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    cfg = {**cfg, "mode": mode, "timings": os.path.join(storage, f"{mode}_{index}.json")}
    resources = {"CPU": cfg["worker_cpus"], **({"GPU": 1 - cfg["validation_gpus"]} if cfg["gpu"] else {})}
    if mode == "inloop_all":
        resources = {"CPU": cfg["worker_cpus"] + cfg["validation_cpus"], **({"GPU": 1} if cfg["gpu"] else {})}
        cfg["threads"] = max(1, round(resources["CPU"]))
    validation = ValidationConfig(
        fn=validate, task_config=ValidationTaskConfig(fn_kwargs={"cfg": cfg}),
        ray_remote_kwargs={"num_cpus": cfg["validation_cpus"], "num_gpus": cfg["validation_gpus"]})
    trainer = DataParallelTrainer(
        train_fn, train_loop_config=cfg,
        scaling_config=ScalingConfig(num_workers=1, use_gpu=cfg["gpu"], resources_per_worker=resources),
        run_config=RunConfig(name=f"{mode}_{index}", storage_path=storage),
        validation_config=validation if mode == "offpath" else None)
    start = time.time()
    result = trainer.fit()
    fit_s = time.time() - start
    timings = json.load(open(cfg["timings"]))
    reported = sorted((m for _, m in result.best_checkpoints), key=lambda m: m["step"])
    assert len(reported) == cfg["evals"], f"{mode}: {len(reported)} checkpoints reported, {cfg['evals']} expected"
    assert all("eval_accuracy" in m for m in reported), f"{mode}: a checkpoint without its evaluation: {reported}"
    last = max(m["evaluated_at"] for m in reported)
    return {"mode": mode, "fit_s": round(fit_s, 2), "train_s": round(timings["train_s"], 2),
            "last_eval_after_fit_start_s": round(last - start, 2),
            "last_eval_after_train_end_s": round(last - timings["train_started_at"] - timings["train_s"], 2),
            "validation_s": [round(m["validation_s"], 2) for m in reported if "validation_s" in m],
            "eval_accuracy": [round(m["eval_accuracy"], 4) for m in reported],
            "load_avg_at_start": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> dict:
    a = build_parser().parse_args(argv)
    import ray
    import torch

    if a.use_gpu and not torch.cuda.is_available():
        raise SystemExit("--use-gpu: torch sees no CUDA device here")
    if a.steps % a.evals:
        raise SystemExit(f"--steps ({a.steps}) must be a multiple of --evals ({a.evals})")
    machine = build_machine_record()
    work = tempfile.mkdtemp(prefix="eval_offpath_")
    model = a.model or (write_bert_base(DEFAULT_MODEL, os.path.join(work, "bert-base")) if a.use_gpu else DEFAULT_MODEL)
    model = os.path.abspath(model) if os.path.isdir(model) else model
    validation_gpus = a.validation_gpus if a.validation_gpus is not None else (0.5 if a.use_gpu else 0)
    paths, held_out = write_tokenized(a, model, work)
    cfg = {"model": model, **{k: os.path.abspath(v) for k, v in paths.items()},
           "steps": a.steps, "evals": a.evals, "batch": a.batch, "gpu": a.use_gpu,
           "worker_cpus": a.worker_cpus, "threads": max(1, round(a.worker_cpus)),
           "validation_cpus": a.validation_cpus, "validation_threads": max(1, round(a.validation_cpus)),
           "validation_gpus": validation_gpus}
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")  # as ftplat's trials poll
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    runs = []
    try:
        for i in range(a.repeats):
            for mode in MODES:
                runs.append(run_one(cfg, mode, os.path.join(work, "storage"), i))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        ray.shutdown()
    for i in range(a.repeats):
        inloop, offpath = (runs[len(MODES) * i + MODES.index(m)]["eval_accuracy"] for m in ("inloop", "offpath"))
        assert abs(inloop[0] - offpath[0]) <= 0.01, f"round {i}: first checkpoint {inloop[0]} vs {offpath[0]}"
    keys = ("fit_s", "train_s", "last_eval_after_fit_start_s", "last_eval_after_train_end_s")
    aggregate = {mode: {k: summarize([r[k] for r in runs if r["mode"] == mode]) for k in keys} for mode in MODES}
    aggregate["offpath"]["validation_s"] = summarize([v for r in runs if r["mode"] == "offpath" for v in r["validation_s"]])
    config = {k: v for k, v in vars(a).items() if k != "json"} | {"model": model, "validation_gpus": validation_gpus,
                                                                   "held_out": held_out}
    report = {"config": config, "machine": machine, "runs": runs, "aggregate": aggregate,
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    write_report(report, a.json)
    return report


if __name__ == "__main__":
    main()
