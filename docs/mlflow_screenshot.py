"""Screenshot the MLflow UI comparing the trial runs of one sweep (headless Chromium).

    python docs/mlflow_screenshot.py --tracking-uri sqlite:////abs/mlflow.db --sweep NAME \
        --out docs/img/mlflow_compare.png

Starts `mlflow server` on 127.0.0.1 against the given store, finds the sweep's parent run and
its child runs, opens MLflow's compare view of the children in headless Chromium and saves a
PNG. Needs Debian's chromium (apt-get install chromium).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from mlflow import MlflowClient


def find_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_compare_url(base: str, client: MlflowClient, experiment: str, sweep: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`ftplat.sweep` = '{sweep}'")
    if not runs:
        raise SystemExit(f"no run of sweep {sweep!r} in experiment {experiment!r}")
    parent = runs[0].info.run_id
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    ids = json.dumps([c.info.run_id for c in children])
    query = urllib.parse.urlencode({"runs": ids, "experiments": json.dumps([exp.experiment_id])})
    return f"{base}/#/compare-runs?{query}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tracking-uri", required=True)
    p.add_argument("--sweep", required=True)
    p.add_argument("--experiment", default="ftplat")
    p.add_argument("--out", default="docs/img/mlflow_compare.png")
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = p.parse_args(argv)

    port = find_free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--backend-store-uri", a.tracking_uri, "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(90):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        url = build_compare_url(base, MlflowClient(base), a.experiment, a.sweep)
        print(url)
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run([a.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
                            "--window-size=1600,1400", "--virtual-time-budget=20000",
                            f"--screenshot={a.out}", url], check=True, timeout=180)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
