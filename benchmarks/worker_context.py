"""Where a trial's ``Trainer.train()`` loses its speed: the same plain HF training in the
execution contexts a trial goes through, one after another, interleaved (issue #18, P1).

On a GPU, ftplat's trial trains slower than plain ``Trainer.train()`` in a fresh process
(BENCHMARKS.md, "GPU: one H200"). A bert-base step at batch 32 and length 160 takes about 45 ms
there, several times what its arithmetic needs at the GPU's bf16 rate, so the CPU side (Python,
kernel launches, data) sets the pace and whatever slows the worker's process slows the step.
This runs ``overhead.py``'s plain side (same job, data, TrainingArguments, collator, metrics,
threads) in:

  process   a fresh spawned process (``overhead.py --plain-process fresh``)
  task      a Ray task: the main thread of a Ray worker process
  thread    a Ray actor running the training in a second thread while the driver polls the
            actor every 0.25 s: how a Train V2 worker runs a training function
  ftplat    a real one-trial ftplat sweep (``overhead.py``'s ftplat side)
  ftplat_untracked  the same without MLflow (``tracking.enabled: false``): the one callback
            of the trial's own that talks to a store during ``train()``

and reports, for each, HF's train_runtime, the time to the first and the 10th step, the median
and mean time of the steps after the 20th (ftplat's step clock, which its worker runs too), and
the evaluation's runtime (the first three contexts). Rounds go, in ``--contexts``' order, until
``--deadline-s`` leaves no room for the next run (estimated by that context's longest run so
far). ``--probe-first-steps`` adds where each run's first steps spent their time
(``first_steps_probe.py``); its hook imports transformers in every Ray worker process, so the
trials' start-up is slower under it.

  python benchmarks/worker_context.py --deadline-s 600 --json /tmp/worker_context.json
  python benchmarks/worker_context.py --use-gpu --model /tmp/bert-base-random --deadline-s 150
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import ray
from transformers import TrainerCallback

import _common
import first_steps_probe
import overhead
from _common import build_machine_record, summarize, write_report
from ftplat.data.preparation import build_tokenized_tables
from ftplat.ray_internals import run_init_private_cluster
from ftplat.storage import read_json
from overhead import build_configs, build_parser, resolve_defaults, run_ftplat, run_plain, write_bert_base

CONTEXTS = ("process", "thread", "ftplat", "ftplat_untracked", "task")


class EvalClock(TrainerCallback):
    """The last evaluation's runtime (the steps are clocked by ``run_plain``'s step clock)."""

    def __init__(self):
        self.eval_runtime = None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.eval_runtime = (metrics or {}).get("eval_runtime", self.eval_runtime)


def build_step_fields(result: dict) -> dict:
    step_time = result.get("step_time") or {}
    return {k: step_time.get(k) for k in ("first_step_s", "first_10_steps_s", "step_ms_median", "step_ms_mean")}


def run_clocked_train(job, data, probe: bool = False) -> dict:
    """``overhead.py``'s plain side, with its evaluation clocked too."""
    if probe:
        first_steps_probe.install()
    clock = EvalClock()
    result = run_plain(job, data, callbacks=[clock])
    return {k: result[k] for k in ("train_runtime_s", "train_samples_per_s")} | build_step_fields(result) | {
        "eval_runtime_s": clock.eval_runtime, "threads": threading.active_count(), "pid": os.getpid()}


@ray.remote
def run_in_task(job, data, probe: bool) -> dict:
    return run_clocked_train(job, data, probe)


@ray.remote(max_concurrency=2)
class ThreadRunner:
    """The training in a second thread; the actor's main thread stays free for polls."""

    def __init__(self):
        self.result, self.error, self.thread = None, None, None

    def start(self, job, data, probe: bool) -> None:
        def target():
            try:
                self.result = run_clocked_train(job, data, probe)
            except BaseException as exc:  # handed to the driver by poll()
                self.error = exc

        self.thread = threading.Thread(target=target, name="train-fn")
        self.thread.start()

    def poll(self):
        if self.error is not None:
            raise self.error
        return None if self.thread.is_alive() else self.result


def run_context(name: str, job, space, data, gpus: float, probe_dir: str | None = None) -> dict:
    cpus = float(job.resources.cpus_per_worker)
    probe = probe_dir is not None
    before = set(os.listdir(probe_dir)) if probe else set()
    load = round(os.getloadavg()[0], 2)
    start = time.perf_counter()
    if name == "process":
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            result = pool.submit(run_clocked_train, job, data, probe).result()
    elif name == "task":
        result = ray.get(run_in_task.options(num_cpus=cpus, num_gpus=gpus).remote(job, data, probe))
    elif name == "thread":
        runner = ThreadRunner.options(num_cpus=cpus, num_gpus=gpus).remote()
        ray.get(runner.start.remote(job, data, probe))
        while (result := ray.get(runner.poll.remote())) is None:
            time.sleep(0.25)
        ray.kill(runner)
    else:
        if name == "ftplat_untracked":
            job = job.model_copy(update={"tracking": job.tracking.model_copy(update={"enabled": False})})
        ours = run_ftplat(job, space)
        result = {k: ours[k] for k in ("train_runtime_s", "train_samples_per_s")} | build_step_fields(ours)
    record = {"context": name, **result, "wall_s": round(time.perf_counter() - start, 2), "load_avg_at_start": load}
    if probe:
        record["probe"] = [read_json(os.path.join(probe_dir, f)) for f in sorted(set(os.listdir(probe_dir)) - before)]
    return record


def next_run_fits(runs: list[dict], name: str, elapsed_s: float, deadline_s: float) -> bool:
    """Whether ``name``'s next run ends before the deadline, estimated by that context's
    longest run so far (before its first, by any run's)."""
    walls = [r["wall_s"] for r in runs if r["context"] == name] or [r["wall_s"] for r in runs] or [0.0]
    return elapsed_s + max(walls) < deadline_s


def build_by_context(runs: list[dict], contexts: list[str]) -> dict:
    return {name: {key: summarize([r.get(key) for r in runs if r["context"] == name])
                   for key in ("train_runtime_s", "first_step_s", "first_10_steps_s", "step_ms_median", "step_ms_mean",
                               "eval_runtime_s")}
            for name in contexts}


def main(argv=None) -> int:
    parser = build_parser()
    parser.add_argument("--deadline-s", type=float, default=900.0,
                        help="start no run that would, at the longest run so far, end after this")
    parser.add_argument("--contexts", default=",".join(CONTEXTS))
    parser.add_argument("--probe-first-steps", action="store_true",
                        help="sample the training thread's stack over the first 10 steps (first_steps_probe.py)")
    a = resolve_defaults(parser.parse_args(argv))
    contexts = a.contexts.split(",")
    assert set(contexts) <= set(CONTEXTS), contexts
    began = time.perf_counter()
    for module in (_common, overhead, first_steps_probe):  # Ray's workers need no benchmarks/ on their path
        cloudpickle.register_pickle_by_value(module)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as storage:
        probe_dir, init_kwargs = None, {}
        if a.probe_first_steps:
            # Every process of the cluster (a trial's Ray Train worker too) probes its Trainers;
            # the spawned plain process inherits the folder from this one's environment.
            probe_dir = os.environ[first_steps_probe.PROBE_DIR_ENV] = os.path.join(storage, "probes")
            os.makedirs(probe_dir)
            path = os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)),
                                                 os.environ.get("PYTHONPATH")]))
            init_kwargs["runtime_env"] = {"worker_process_setup_hook": "first_steps_probe.install",
                                          "env_vars": {first_steps_probe.PROBE_DIR_ENV: probe_dir,
                                                       "PYTHONPATH": path}}
        model = a.model or (write_bert_base(_common.DEFAULT_MODEL, os.path.join(storage, "bert-base-random"))
                            if a.use_gpu else _common.DEFAULT_MODEL)
        job, space = build_configs(a, storage, model)
        data = build_tokenized_tables(job)
        run_init_private_cluster(num_cpus=a.threads + 1, num_gpus=1 if a.use_gpu else 0,
                                 include_dashboard=False, logging_level="ERROR", **init_kwargs)
        try:
            i = 0
            while True:
                name = contexts[i % len(contexts)]
                if not next_run_fits(runs, name, time.perf_counter() - began, a.deadline_s):
                    break
                job = job.model_copy(update={"storage": job.storage.model_copy(update={"sweep_name": f"ctx-{i}"})})
                runs.append(run_context(name, job, space, data, 1.0 if a.use_gpu else 0.0, probe_dir))
                print("run", json.dumps(runs[-1]), flush=True)
                i += 1
        finally:
            ray.shutdown()
    by_context = build_by_context(runs, contexts)
    report = {"config": vars(a), "machine": build_machine_record(), "runs": runs, "aggregate": by_context}
    write_report(report, a.json)
    for name, stats in by_context.items():
        print(name, ", ".join(f"{k} {v['median']:g} [{v['min']:g}, {v['max']:g}] (n={v['n']})"
                              for k, v in stats.items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
