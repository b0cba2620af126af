"""Where a one-worker Train run's end goes: the lean trainer (ftplat's, controller in the calling
actor) runs a function that optionally imports torch (VARIANT=torch) or torch and transformers'
Trainer (VARIANT=tf), optionally freezes the heap for the cyclic GC (FREEZE=1), optionally makes
one ``ray.train.report`` (REPORT=metrics, or REPORT=ckpt with a small checkpoint), sleeps 1.5 s
and notes the time; printed per run: fit(), the function's end to fit()'s return ("teardown"),
to the worker group's shutdown, the shutdown itself, and after it, and the controller's last six
polls of the worker (start, seconds, finished). The end is seen at the first poll after it: the
teardown is mostly where the end falls between two 0.25 s polls. A fresh local cluster of its
own (2 CPUs); 3 runs, each from a fresh actor:

  VARIANT=tf FREEZE=1 python benchmarks/results/trial_cost/gc_freeze/teardown_probe.py
"""
import json
import os
import tempfile
import time

os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")
os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")
import ray  # noqa: E402
from ray.train import RunConfig, ScalingConfig  # noqa: E402

from ftplat.ray_internals import build_lean_trainer_class  # noqa: E402

WORK = tempfile.mkdtemp(prefix="teardown_probe_")
END = os.path.join(WORK, "end")


def fn(config):
    if os.environ.get("VARIANT") in ("torch", "tf"):
        import torch
        x = torch.randn(512, 512)
        for _ in range(200):
            x = torch.tanh(x @ x)
    if os.environ.get("VARIANT") == "tf":
        import transformers.trainer  # noqa: F401
        if os.environ.get("FREEZE"):
            import gc
            gc.collect()
            gc.freeze()
    if os.environ.get("REPORT"):
        import ray.train
        ckpt = os.path.join(WORK, f"ck_{time.time()}")
        os.makedirs(ckpt)
        open(os.path.join(ckpt, "w.bin"), "wb").write(b"x" * 1000)
        ray.train.report({"m": 1.0}, checkpoint=ray.train.Checkpoint.from_directory(ckpt) if os.environ["REPORT"] == "ckpt" else None)
    time.sleep(1.5)
    open(END, "w").write(repr(time.time()))


@ray.remote(num_cpus=0)
class Runner:
    def run(self, i):
        from ray.train.v2._internal.execution.worker_group import worker_group as wgm

        marks, real = {}, wgm.WorkerGroup.shutdown

        def shutdown(group):
            t = time.time()
            real(group)
            marks["shutdown"] = (t, time.time())

        wgm.WorkerGroup.shutdown = shutdown
        real_poll = wgm.WorkerGroup.poll_status
        polls = marks.setdefault("polls", [])

        def poll_status(group, timeout=None):
            a = time.time()
            st = real_poll(group, timeout=timeout)
            polls.append((round(a, 3), round(time.time() - a, 3), st.finished))
            return st

        wgm.WorkerGroup.poll_status = poll_status
        t0 = time.time()
        build_lean_trainer_class(process_group=False)(
            fn, scaling_config=ScalingConfig(num_workers=1),
            run_config=RunConfig(name=f"probe{i}", storage_path=os.path.join(WORK, "storage"))).fit()
        t1, end = time.time(), float(open(END).read())
        print("END", end, "POLLS", marks["polls"][-6:], flush=True)
        return {"fit": t1 - t0, "teardown": t1 - end, "to_shutdown_start": marks["shutdown"][0] - end,
                "shutdown": marks["shutdown"][1] - marks["shutdown"][0], "after_shutdown": t1 - marks["shutdown"][1]}


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True)
    for i in range(3):
        runner = Runner.remote()
        print(json.dumps({k: round(v, 3) for k, v in ray.get(runner.run.remote(i)).items()}))
        ray.kill(runner)
