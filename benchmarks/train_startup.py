"""What Ray Train V2 costs before a trial's code runs: ``TorchTrainer.fit()`` of a function
that only notes the time, on a fresh local cluster, from inside a Ray task (as a Tune trial
driver calls it), ``--repeats`` times in a row. Reports the seconds from ``fit()`` to the
function's first line and to ``fit()``'s return, and which Ray processes each run started
(read from the session's worker logs: Train starts a controller, a placement-group cleaner, a
synchronization actor, the worker and a dataset manager, each a fresh Python process).

  python benchmarks/train_startup.py --repeats 5 --json /tmp/train_startup.json
  python benchmarks/train_startup.py --repeats 5 --env RAY_TRAIN_ENABLE_PREEMPTION_WATCHER=0
  python benchmarks/train_startup.py --repeats 5 --job-env   # Train's env vars as the job's runtime env

The first run also pays for imports that later runs find cached on disk; the summary leaves
it out.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parse_env  # noqa: E402

#: What ftplat's trial driver sets before it calls fit() (tune/trial.py, ray_internals/train_runs.py).
FTPLAT_ENV = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--env", type=parse_env, action="append", default=[], metavar="KEY=VALUE",
                   help="set in the cluster's environment (Train passes its own variables on)")
    p.add_argument("--job-env", action="store_true",
                   help="give the job a runtime env with the variables Train gives its actors")
    p.add_argument("--json", help="write the whole report here")
    return p


def read_started_processes(session_logs: str) -> list[tuple[str, str]]:
    """(first log time, actor name) of each worker process of a Ray session, in start order."""
    started = []
    for out in glob.glob(os.path.join(session_logs, "worker-*.out")):
        worker_id = os.path.basename(out).split("-")[1]
        with open(out) as f:
            lines = f.read().splitlines()
        name = next((line.split(":", 2)[2] for line in lines if line.startswith(":actor_name:")), "task")
        core = glob.glob(os.path.join(session_logs, f"python-core-worker-{worker_id}*.log"))
        if core:
            with open(core[0]) as f:
                started.append((f.readline()[1:24], name))
    return sorted(started)


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.repeats < 2:
        build_parser().error("--repeats must be at least 2 (the first run is left out of the summary)")
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from _common import build_machine_record, summarize, write_report

    env = {**FTPLAT_ENV, **dict(a.env)}
    os.environ.update(env)
    init = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
    if a.job_env:
        from ray.train.v2._internal.constants import (DEFAULT_RAY_WARN_BLOCKING_GET_INSIDE_ASYNC_VALUE,
                                                      RAY_WARN_BLOCKING_GET_INSIDE_ASYNC_ENV_VAR)
        init["runtime_env"] = {"env_vars": {**env, RAY_WARN_BLOCKING_GET_INSIDE_ASYNC_ENV_VAR:
                                            DEFAULT_RAY_WARN_BLOCKING_GET_INSIDE_ASYNC_VALUE}}
    machine = build_machine_record()
    with tempfile.TemporaryDirectory(prefix="train-startup-") as root:
        def note_entry(config):
            with open(config["path"], "w") as f:
                f.write(str(time.time()))

        @ray.remote(num_cpus=0)
        def run_fit(i: int) -> dict:
            path = os.path.join(root, f"entered-{i}")
            start = time.time()
            TorchTrainer(note_entry, train_loop_config={"path": path}, scaling_config=ScalingConfig(num_workers=1),
                         run_config=RunConfig(name=f"startup-{i}", storage_path=os.path.join(root, "storage"))).fit()
            with open(path) as f:
                entered = float(f.read())
            return {"to_entry_s": round(entered - start, 2), "fit_s": round(time.time() - start, 2)}

        ctx = ray.init(**init)
        try:
            runs = []
            for i in range(a.repeats):
                runs.append(ray.get(run_fit.remote(i)))
                print(f"{i + 1}/{a.repeats}: entry after {runs[-1]['to_entry_s']} s, fit {runs[-1]['fit_s']} s",
                      flush=True)
            session_logs = os.path.join(ctx.address_info["session_dir"], "logs")
        finally:
            ray.shutdown()
        processes = read_started_processes(session_logs)
    names = [name for _, name in processes]
    report = {"config": {**vars(a), "env": env}, "machine": machine, "runs": runs, "processes": processes,
              "aggregate": {"to_entry_s": summarize([r["to_entry_s"] for r in runs[1:]]),
                            "fit_s": summarize([r["fit_s"] for r in runs[1:]]),
                            "processes_per_fit": {n: names.count(n) / a.repeats for n in sorted(set(names))}}}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
