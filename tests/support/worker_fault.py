"""Kill a Ray Train worker of a running sweep at a chosen point and let the sweep finish.

The sweep runs ``jobs/imdb_sweep.py`` in its own process (and its own local Ray cluster), so
the SIGKILL hits only that sweep's worker and never this test session's cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil

REPO = Path(__file__).resolve().parents[2]


def find_train_workers(root_pid: int) -> list[psutil.Process]:
    """The RayTrainWorker actors under ``root_pid``; short-lived children a worker forks
    (DeepSpeed probes the CPU) carry the worker's name too and are left out."""
    workers = []
    for p in psutil.Process(root_pid).children(recursive=True):
        try:
            if p.name() == "ray::RayTrainWorker" and p.parent().name() != "ray::RayTrainWorker":
                workers.append(p)
        except psutil.NoSuchProcess:
            continue
    return workers


def build_checkpoint_registered(sweep_dir: Path, checkpoint: str) -> Callable[[], bool]:
    """Ready once the Train controller has registered ``checkpoint`` (its snapshot, written in
    storage as it registers, names it): the deterministic point to kill a worker, whose
    restart must resume from there. Tune's own files reach storage only when Tune syncs them,
    which can be after a short trial has ended."""

    def ready() -> bool:
        for snapshot in sweep_dir.glob("train-*/checkpoint_manager_snapshot.json"):
            try:
                if f'"{checkpoint}"' in snapshot.read_text():
                    return True
            except OSError:  # replaced while read
                continue
        return False

    return ready


def run_sweep_killing_one_worker(args: list[str], log_path: Path, ready: Callable[[], bool],
                                 num_workers: int, env: dict[str, str] | None = None) -> str:
    """Run ``jobs/imdb_sweep.py args``; once ``ready()`` holds, SIGKILL the last of its
    ``num_workers`` train workers; return the sweep's log after it exits with 0."""
    env = {k: v for k, v in (env or os.environ).items() if k != "RAY_ADDRESS"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "jobs/imdb_sweep.py", *args], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline, reached = time.time() + 600, False
            while time.time() < deadline and proc.poll() is None and not reached:
                reached = ready()
                time.sleep(0.2)
            assert reached, log_path.read_text()[-3000:]
            workers = find_train_workers(proc.pid)
            assert len(workers) == num_workers, workers
            os.kill(workers[-1].pid, signal.SIGKILL)
            assert proc.wait(timeout=900) == 0, log_path.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return log_path.read_text()
