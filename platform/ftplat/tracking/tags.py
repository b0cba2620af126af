"""The tags of a sweep's MLflow parent run: where it ran (the Ray job, its dashboard), the code
(git commit) and the library versions."""

from __future__ import annotations

import json
import os
import subprocess

from ftplat.versions import collect_versions

#: The commit of the code a sweep runs, for a copy without its git history (``ray job submit``
#: uploads the working tree without ``.git``): ``FTPLAT_GIT_COMMIT=$(git rev-parse HEAD)``.
GIT_COMMIT_ENV = "FTPLAT_GIT_COMMIT"


def read_git_commit() -> str | None:
    """The commit of the ftplat code running: ``$FTPLAT_GIT_COMMIT``, else the HEAD of the git
    checkout holding this package (never the current directory's repository, which may be
    another project's), else None (an installed package, an uploaded copy)."""
    if os.environ.get(GIT_COMMIT_ENV, "").strip():
        return os.environ[GIT_COMMIT_ENV].strip()
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        # Tracked there: an installed copy in a virtualenv inside another repository is not.
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "__init__.py"], capture_output=True,
                                 text=True, timeout=5, cwd=package_dir)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=package_dir)
    except (OSError, subprocess.SubprocessError):
        return None
    return commit.stdout.strip() if tracked.returncode == 0 and commit.returncode == 0 else None


def build_run_tags(sweep_name: str, *, dashboard_url: str | None) -> dict[str, str]:
    tags = {"ftplat.sweep": sweep_name}
    job_config = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    if job_config:
        submission = json.loads(job_config).get("metadata", {}).get("job_submission_id")
        if submission:
            tags["ray.job_submission_id"] = submission
    if dashboard_url:
        tags["ray.dashboard_url"] = dashboard_url if "://" in dashboard_url else f"http://{dashboard_url}"
    commit = read_git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    for name, version in collect_versions().items():
        tags[f"version.{name}"] = str(version)
    return tags


#: The parent run's tag listing every Ray job that ran the sweep (a --resume is another job).
JOB_SUBMISSION_IDS_TAG = "ray.job_submission_ids"


def build_resumed_tags(old: dict[str, str], now: dict[str, str]) -> dict[str, str]:
    """The parent run's tags to set when a --resume reopens it: this driver's Ray job and
    dashboard (the job whose log ends the sweep), and every job that ran it."""
    tags = {k: v for k, v in now.items() if k in ("ray.job_submission_id", "ray.dashboard_url") and old.get(k) != v}
    submission = now.get("ray.job_submission_id")
    if submission:
        ids = [i for i in (old.get(JOB_SUBMISSION_IDS_TAG) or old.get("ray.job_submission_id") or "").split(",") if i]
        if submission not in ids:
            tags[JOB_SUBMISSION_IDS_TAG] = ",".join([*ids, submission])
    return tags
