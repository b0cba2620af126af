"""Screenshots of a real sweep for the README, taken in headless Chromium.

    # while the sweep runs: its private cluster's dashboard (the URL is the MLflow parent run's
    # tag ray.dashboard_url, or the driver's "Ray dashboard: http://..." log line)
    python docs/screenshots.py ray --url http://127.0.0.1:8265 --out docs/img/ray_actors.png
    python docs/screenshots.py ray --url http://127.0.0.1:8265 --actor-class ImplicitFunc \
        --out docs/img/ray_trial_drivers.png
    python docs/screenshots.py ray --url http://127.0.0.1:8265 --page train --out docs/img/ray_train_runs.png
    # after it ends
    python docs/screenshots.py mlflow --tracking-uri sqlite:////abs/mlflow.db --sweep NAME \
        --out docs/img/mlflow_compare.png
    python docs/screenshots.py optuna --study-db /abs/ftplat_results/NAME/optuna_study.db \
        --out docs/img/optuna_dashboard.png

`mlflow` starts `mlflow server` and `optuna` starts `optuna-dashboard`, each on 127.0.0.1 and a
free port, and stops it at the end; `ray` reads the token of the cluster's token auth from
~/.ray/auth_token (--token-file). A docs tool, not part of ftplat or its tests: it needs
Debian's chromium (`apt-get install chromium`) and the Python package playwright (`pip install
playwright`), which drives that chromium (`playwright install` and its download are not needed).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"  # the servers started here listen on loopback only
# What works in a container without a GPU or network; a fresh profile per shot (no stale cookies).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The cookie the Ray dashboard sets after its token prompt (ray._private.authentication).
RAY_TOKEN_COOKIE = "ray-authentication-token"


def find_free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            return urllib.request.urlopen(url, timeout=5).close()
        except OSError:
            if time.time() > deadline:
                raise SystemExit(f"{url} did not answer in {timeout:.0f} s") from None
            time.sleep(1)


@contextlib.contextmanager
def run_server(cmd: list[str], health_url: str):
    """A server subprocess for the length of one screenshot; stopped even when the shot fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(health_url)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def open_page(chromium: str, width: int, height: int):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True,
                                                   args=CHROMIUM_ARGS, viewport={"width": width, "height": height})
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


def settle(page, a) -> None:
    """Wait for `--wait-for` on the page, then `--settle` seconds: charts animate in, and the
    Ray dashboard's first actor list can be a stale one that its next poll replaces."""
    page.get_by_text(a.wait_for, exact=False).first.wait_for(timeout=a.timeout * 1000)
    with contextlib.suppress(Exception):  # pages that poll (MLflow) never go idle: best effort
        page.wait_for_load_state("networkidle", timeout=10_000)
    page.wait_for_timeout(a.settle * 1000)


def format_field(key: str, value) -> str:
    if key.endswith("_time_ns") and value:
        return time.strftime("%H:%M:%S UTC", time.gmtime(value / 1e9))
    return "-" if value is None else str(value)


def shoot_train_state(page, base: str, out: str) -> None:
    """The Train state the dashboard serves (one run per trial, named train-<trial id>): the
    dashboard bundled with Ray 2.60 has no page for it, so its fields are tabulated here."""
    reply = page.context.request.get(f"{base}/api/train/v2/runs/v1")  # with the context's token cookie
    if not reply.ok:
        raise SystemExit(f"Train state: HTTP {reply.status} {reply.text()[:300]}")
    runs = sorted(reply.json()["train_runs"], key=lambda r: r.get("start_time_ns") or 0)
    # Raw, a run is thousands of characters (attempts, workers, settings): keep the fields that
    # name the trial and tie it to the Actors page (controller_actor_id).
    keep = ("name", "status", "controller_actor_id", "job_id", "start_time_ns", "end_time_ns")
    cells = ["".join(f"<td>{html.escape(format_field(k, r.get(k)))}</td>" for k in keep) for r in runs]
    page.set_content(
        "<style>body{font:15px sans-serif;margin:16px} td,th{border:1px solid #ccc;padding:6px 10px;"
        "font-family:monospace} table{border-collapse:collapse} #shot{display:inline-block}</style>"
        f"<div id=shot><h3>Ray Train state from the dashboard: GET {html.escape(base)}/api/train/v2/runs/v1 "
        f"({len(runs)} runs, {len(keep)} of their fields)</h3><table><tr>"
        + "".join(f"<th>{k}</th>" for k in keep) + "</tr>" + "".join(f"<tr>{c}</tr>" for c in cells)
        + "</table></div>")
    page.locator("#shot").screenshot(path=out)


def shoot_ray(a) -> None:
    """The dashboard's Actors page (each trial's driver, Train controller and workers), or with
    `--page train` the Train state."""
    base = a.url.rstrip("/")
    with open_page(a.chromium, a.width, a.height) as page:
        token_file = Path(a.token_file).expanduser()
        if token_file.exists():  # token auth is on: hand the dashboard its cookie, skip the prompt
            page.context.add_cookies([{"name": RAY_TOKEN_COOKIE, "value": token_file.read_text().strip(),
                                       "url": base}])
        if a.page == "train":
            shoot_train_state(page, base, a.out)
            return
        page.goto(f"{base}/#/actors")
        settle(page, a)
        if a.actor_class:  # the page's own Class filter: e.g. the trial drivers, each repr'd trial-<id>
            page.get_by_label("Class").fill(a.actor_class)
            page.keyboard.press("Enter")
            page.wait_for_timeout(3000)
        page.screenshot(path=a.out, full_page=a.full_page)


def build_compare_url(base: str, experiment: str, sweep: str) -> tuple[str, list[str], str]:
    """The compare view of the sweep's trial runs, the searched params (the parent run's
    `search.<path>` that trial runs log as `<path>`) and the score metric (`score.<scope>`)."""
    from mlflow import MlflowClient

    client = MlflowClient(base)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise SystemExit(f"no experiment {experiment!r} in the store")
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`ftplat.sweep` = '{sweep}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    if not parents:
        raise SystemExit(f"no run of sweep {sweep!r} in experiment {experiment!r}")
    parent = parents[0]
    children = client.search_runs([exp.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    logged = set().union(*(c.data.params for c in children))
    searched = sorted(k[len("search."):] for k in parent.data.params
                      if k.startswith("search.") and k[len("search."):] in logged)
    ids = json.dumps([c.info.run_id for c in children])
    query = urllib.parse.urlencode({"runs": ids, "experiments": json.dumps([exp.experiment_id])})
    return f"{base}/#/compare-runs?{query}", searched, f"score.{parent.data.params.get('search.scope', 'last')}"


def pick(page, label: str, wanted: list[str]) -> None:
    """Set one of the compare page's multi-selects ("Parameters:", "Metrics:") to `wanted`: by
    default it holds the first keys the runs logged (for metrics `loss`, not the score)."""
    box = page.locator(f"xpath=//*[normalize-space(text())='{label}']/following::*[contains(@class,'select')][1]")
    remove = box.locator("[class*='selection-item-remove']")
    while remove.count():
        remove.first.click()
    for key in wanted:
        box.click()
        page.keyboard.type(key)  # the option list is virtual: only typing brings a key into view
        option = page.locator(f"[class*='select-item-option'][title='{key}']")
        option.first.click() if option.count() else page.keyboard.press("Enter")
    page.keyboard.press("Escape")


def shoot_mlflow(a) -> None:
    if a.tracking_uri.startswith(("http://", "https://")):  # a running server: use it as it is
        server, base = contextlib.nullcontext(), a.tracking_uri.rstrip("/")
    else:
        port = find_free_port()
        base = f"http://{HOST}:{port}"
        server = run_server([sys.executable, "-m", "mlflow", "server", "--host", HOST, "--port", str(port),
                             "--backend-store-uri", a.tracking_uri, "--workers", "1"], f"{base}/health")
    with server:
        url, searched, score = build_compare_url(base, a.experiment, a.sweep)
        print(url)
        with open_page(a.chromium, a.width, a.height) as page:
            page.goto(url)
            settle(page, a)
            close = page.locator("[data-assistant-ui] button[aria-label='Close']")  # a chat panel, 1/3 of the page
            if close.count():
                close.first.click()
            pick(page, "Parameters:", a.params or searched)
            pick(page, "Metrics:", a.metrics or [score])
            # The params table below the plot lists every hf.* argument: only those that differ.
            page.get_by_role("switch").first.click()
            page.wait_for_timeout(3000)
            # Down to the Metrics table (dozens of rows; the plot shows the score's values).
            end = page.locator("xpath=//*[normalize-space(text())='Metrics']").first.bounding_box()
            clip = {"x": 0, "y": 0, "width": a.width, "height": end["y"] - 8} if end and not a.full_page else None
            page.screenshot(path=a.out, clip=clip, full_page=a.full_page)


def shoot_optuna(a) -> None:
    import optuna

    db = Path(a.study_db).resolve()
    storage_url = f"sqlite:///{db}"
    study = a.study or db.parent.name  # ftplat names the study after the sweep (its folder)
    study_id = optuna.storages.RDBStorage(storage_url).get_study_id_from_name(study)
    port = find_free_port()
    base = f"http://{HOST}:{port}"
    exe = shutil.which("optuna-dashboard") or "optuna-dashboard"
    with run_server([exe, storage_url, "--host", HOST, "--port", str(port), "--quiet"], f"{base}/api/studies"):
        with open_page(a.chromium, a.width, a.height) as page:
            page.goto(f"{base}/dashboard/studies/{study_id}")  # history, importances, timeline
            settle(page, a)
            page.screenshot(path=a.out, full_page=a.full_page)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", required=True)
    common.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    common.add_argument("--width", type=int, default=1600)
    common.add_argument("--height", type=int, help="window height (mlflow 1600: plot and params; others 1000)")
    common.add_argument("--full-page", action="store_true", help="the whole page, not only the window")
    common.add_argument("--timeout", type=float, default=90, help="seconds to wait for the page")
    common.add_argument("--settle", type=float, help="seconds to wait after it loaded (ray 15, others 5)")

    r = sub.add_parser("ray", parents=[common], help="the Ray dashboard of a running sweep")
    r.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8265")
    r.add_argument("--page", choices=["actors", "train"], default="actors")
    r.add_argument("--wait-for", default="RayTrainWorker", help="text the page must show first")
    r.add_argument("--token-file", default=os.path.join("~", ".ray", "auth_token"))
    r.add_argument("--actor-class", help="show only this class on the Actors page (ImplicitFunc: the trial drivers)")

    m = sub.add_parser("mlflow", parents=[common], help="MLflow's comparison of a sweep's trial runs")
    m.add_argument("--tracking-uri", required=True, help="a store (sqlite:///...) or a running server (http://...)")
    m.add_argument("--sweep", required=True)
    m.add_argument("--experiment", default="ftplat")
    m.add_argument("--params", nargs="*", help="default: the searched ones")
    m.add_argument("--metrics", nargs="*", help="default: the score, score.<scope>")
    m.add_argument("--wait-for", default="Parallel Coordinates Plot")

    o = sub.add_parser("optuna", parents=[common], help="optuna-dashboard on a sweep's study")
    o.add_argument("--study-db", required=True, help="the sweep folder's optuna_study.db")
    o.add_argument("--study", help="study name (default: the sweep folder's name)")
    o.add_argument("--wait-for", default="Hyperparameter Importance")  # "History" is also a hidden menu label

    a = p.parse_args(argv)
    a.settle = a.settle if a.settle is not None else 15 if a.what == "ray" else 5
    a.height = a.height or {"mlflow": 1600, "optuna": 1250}.get(a.what, 1000)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    {"ray": shoot_ray, "mlflow": shoot_mlflow, "optuna": shoot_optuna}[a.what](a)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
