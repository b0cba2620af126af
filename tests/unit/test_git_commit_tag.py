"""The parent run's git commit is the ftplat checkout's that runs, not the current
directory's repository; an uploaded copy without ``.git`` (``ray job submit``) names it in
``$FTPLAT_GIT_COMMIT``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ftplat.tracking.runs import build_run_tags, read_git_commit

REPO = Path(__file__).resolve().parents[2]


def test_the_checkout_holding_ftplat_names_the_commit_wherever_the_driver_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("FTPLAT_GIT_COMMIT", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    other = tmp_path / "other-project"
    other.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=other, check=True)
    subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=other, check=True)
    monkeypatch.chdir(other)
    import ftplat

    in_checkout = head.returncode == 0 and Path(ftplat.__file__).resolve().is_relative_to(REPO)
    assert read_git_commit() == (head.stdout.strip() if in_checkout else None)
    monkeypatch.setenv("FTPLAT_GIT_COMMIT", "0123abc")
    assert build_run_tags("s", dashboard_url=None)["mlflow.source.git.commit"] == "0123abc"
