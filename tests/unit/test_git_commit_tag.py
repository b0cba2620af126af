"""The parent run's git commit is the ftplat checkout's that runs, not the current
directory's repository; an uploaded copy without ``.git`` (``ray job submit``) names it in
``$FTPLAT_GIT_COMMIT``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ftplat.tracking.tags import build_run_tags, read_git_commit

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


def test_an_installed_copy_inside_another_repository_names_no_commit(tmp_path, monkeypatch):
    """ftplat installed (not editable) into a virtualenv inside another project's repository:
    that repository's HEAD is not ftplat's commit."""
    import shutil

    import ftplat.tracking.tags as tags

    monkeypatch.delenv("FTPLAT_GIT_COMMIT", raising=False)
    other = tmp_path / "project"
    package = other / ".venv" / "site-packages" / "ftplat"
    shutil.copytree(Path(tags.__file__).parents[1], package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=other, check=True)
    (other / ".gitignore").write_text(".venv/\n")
    subprocess.run(["git", "add", ".gitignore"], cwd=other, check=True)
    subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "-m", "x"], cwd=other,
                   check=True)
    monkeypatch.setattr(tags, "__file__", str(package / "tracking" / "tags.py"))
    assert tags.read_git_commit() is None


def test_a_resumed_sweeps_parent_run_names_the_job_that_continued_it():
    """The parent run kept the first job's submission id: the job whose log holds the winner
    line could not be found from MLflow."""
    from ftplat.tracking.tags import build_resumed_tags

    old = {"ray.job_submission_id": "raysubmit_a", "ray.dashboard_url": "http://h:8265", "ftplat.sweep": "s"}
    now = {"ray.job_submission_id": "raysubmit_b", "ray.dashboard_url": "http://h:8265", "ftplat.sweep": "s"}
    assert build_resumed_tags(old, now) == {"ray.job_submission_id": "raysubmit_b",
                                            "ray.job_submission_ids": "raysubmit_a,raysubmit_b"}
    again = {**old, "ray.job_submission_id": "raysubmit_b", "ray.job_submission_ids": "raysubmit_a,raysubmit_b"}
    assert build_resumed_tags(again, {**now, "ray.job_submission_id": "raysubmit_c"})["ray.job_submission_ids"] == \
        "raysubmit_a,raysubmit_b,raysubmit_c"
    assert build_resumed_tags(old, {"ftplat.sweep": "s"}) == {}  # resumed outside a Ray job: nothing to add
