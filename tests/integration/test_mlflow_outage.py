"""The MLflow server dies while the first trial trains: every trial still runs to its end, the
sweep writes its summary with a winner, and `ftplat sweep` exits 1 saying tracking failed.

The sweep runs as its own process on a private Ray cluster, as a user runs it: MLflow's HTTP
settings are environment variables every process reads, and the shared test cluster's
workers were started before this test could set them. One retry instead of MLflow's default
seven (about four minutes per call against a dead server) keeps the test short; what is
tested is what ftplat does once MLflow gives up, whatever its retry budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from local_servers import find_free_port, run_server_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SWEEP_TIMEOUT_S = 540


def run_kill_listener(port: int) -> None:
    """Kill the process listening on ``port`` (the server `mlflow server` runs) at once, like
    a crash: its parent, the `mlflow` command, then exits too."""
    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            psutil.Process(conn.pid).kill()


def run_kill_at_first_checkpoint(sweep_dir: Path, port: int, stop: threading.Event, killed: list[float]) -> None:
    while not stop.is_set():
        if any(sweep_dir.glob("train-*/checkpoint-*")):
            run_kill_listener(port)
            killed.append(time.monotonic())
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def outage(tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-outage")
    storage = root / "storage"
    port = find_free_port()
    argv = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{root}/mlflow.db", "--artifacts-destination", str(root / "artifacts"),
            "--workers", "1"]
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "MLFLOW_TRACKING_URI"}}
    env.update(PYTHONPATH=os.pathsep.join(p for p in [env.get("PYTHONPATH"), str(REPO / "platform")] if p),
               MLFLOW_HTTP_REQUEST_MAX_RETRIES="1", MLFLOW_HTTP_REQUEST_TIMEOUT="10")
    stop, killed = threading.Event(), []
    with run_server_process(argv, port, root / "server.log", start_timeout_s=90, health_path="/health") as uri:
        watcher = threading.Thread(target=run_kill_at_first_checkpoint,
                                   args=(storage / "outage", port, stop, killed), daemon=True)
        watcher.start()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "import sys; from ftplat.cli.main import main; sys.exit(main(sys.argv[1:]))",
                 "sweep", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
                 "--storage", str(storage), "--name", "outage",
                 f"tracking.tracking_uri={uri}", "tracking.experiment_name=outage",
                 "data.max_length=32", "data.train_size=256", "data.eval_size=64",
                 "training.num_train_epochs=2.0", "training.per_device_train_batch_size=16",
                 "training.logging_steps=4", "resources.num_workers=1", "resources.max_concurrent_trials=1",
                 "search.num_samples=2", "search.seed=5",
                 "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-3, high: 1.0e-2}}"],
                cwd=root, env=env, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S,
            )
        finally:
            stop.set()
            watcher.join()
    (root / "sweep.log").write_text(proc.stdout + proc.stderr)  # kept for a failure's post-mortem
    summary_file = storage / "outage" / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else None
    return proc, summary, killed


def test_the_server_died_while_the_first_trial_trained(outage):
    proc, _, killed = outage
    assert killed, f"the sweep never saved a checkpoint:\n{proc.stderr[-3000:]}"


def test_every_trial_finishes_and_the_summary_has_a_winner(outage):
    proc, summary, _ = outage
    assert summary is not None, f"no summary.json:\n{proc.stderr[-3000:]}"
    assert summary["status_counts"] == {"TERMINATED": 2}
    assert summary["winner"] is not None and summary["winner"]["score"] is not None
    assert all(t["best_checkpoint"]["exists"] for t in summary["trials"])


def test_what_tracking_lost_is_recorded_and_the_sweep_exits_1(outage):
    proc, summary, _ = outage
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: MLflow tracking failed: "), errors
    assert "closing the sweep: " in summary["tracking_error"]
    # Each trial lost its calls to the dead server and said so; none failed for it.
    lost = {t["trial_id"]: t["train_result"]["tracking_errors"] for t in summary["trials"]}
    assert all(e["count"] >= 1 and e["first_error"] for e in lost.values()), lost
    assert "MLflow tracking failed" in proc.stderr
