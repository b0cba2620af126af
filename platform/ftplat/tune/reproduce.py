"""``ftplat reproduce``: one trial of a recorded sweep run again as a one-trial sweep, and
whether it scored what it scored then.

The new sweep is built from what the sweep recorded (``sweep_config.json``: the job config and
search space as validated, seed included; ``summary.json``: the trial's searched values and its
evaluations), with the trial's values as the only point to evaluate and the FIFO scheduler (a
trial the original's ASHA stopped early is compared on the evaluations it made).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import posixpath
from typing import Any

from ftplat.config.loading import build_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.errors import UserError
from ftplat.layout import build_summary_uri, build_sweep_config_uri
from ftplat.records import SweepSummary, TrialRecord
from ftplat.storage import path_exists, read_json

#: A metric value within this of the original's counts as the same by default: CPU runs on one
#: machine reproduce exactly; GPU kernels and other thread counts differ in the last digits.
DEFAULT_TOLERANCE = 1e-4


def read_recorded_sweep(sweep_uri: str) -> tuple[dict[str, Any], SweepSummary]:
    """The sweep's recorded configs and its summary; a sweep without them cannot be reproduced.
    The configs' ``storage.storage_path`` is the folder that holds the sweep now, so that the
    reproduction runs beside it even when it was copied or moved since it ran."""
    config_uri = build_sweep_config_uri(sweep_uri)
    if not path_exists(config_uri):
        raise UserError(f"{sweep_uri} holds no sweep_config.json: not an ftplat sweep folder "
                        "(`ftplat sweeps list` shows the sweeps under a storage root)")
    if not path_exists(build_summary_uri(sweep_uri)):
        raise UserError(f"{sweep_uri} has no summary.json yet: reproduce a trial once its sweep has ended "
                        f"(`ftplat sweeps show {sweep_uri}` says how far it is)")
    config_json = read_json(config_uri)
    config_json["job"]["storage"]["storage_path"] = build_parent_uri(sweep_uri)
    return config_json, SweepSummary.read(sweep_uri)


def build_parent_uri(sweep_uri: str) -> str:
    """The folder (or ``s3://`` prefix) holding the sweep folder ``sweep_uri``; a local one
    absolute, as the sweep's workers do not share this process's directory."""
    if "://" not in sweep_uri:
        return os.path.dirname(os.path.abspath(os.path.expanduser(sweep_uri.rstrip("/") or "/")))
    scheme, path = sweep_uri.split("://", 1)
    return f"{scheme}://{posixpath.dirname(path.rstrip('/'))}"


def select_trial(summary: SweepSummary, trial_id: str | None) -> TrialRecord:
    """The trial named, or the winner; one without a single evaluation has nothing to compare."""
    if trial_id is None:
        if summary.winner is None:
            raise UserError(f"sweep {summary.sweep_name} has no winner: name a trial with --trial ID "
                            f"(one of {', '.join(t.trial_id for t in summary.trials)})")
        trial_id = summary.winner.trial_id
    known = {t.trial_id: t for t in summary.trials}
    if trial_id not in known:
        raise UserError(f"--trial {trial_id}: not a trial of sweep {summary.sweep_name}; its trials: "
                        f"{', '.join(known)}")
    trial = known[trial_id]
    if not trial.history:
        raise UserError(f"--trial {trial_id}: the trial made no evaluation ({trial.status}), so there is no "
                        "score to reproduce; pick a trial with evaluations (`ftplat sweeps show`)")
    return trial


def build_reproduce_configs(config_json: dict[str, Any], trial: TrialRecord, *, sweep_name: str,
                            overrides: list[str] = ()) -> tuple[JobConfig, SearchSpaceConfig]:
    """The recorded configs with the trial's values as the one trial to run, registering no
    model, validated like any sweep's (``overrides`` last, so a user can point storage or
    tracking elsewhere)."""
    job = copy.deepcopy(config_json["job"])
    space = copy.deepcopy(config_json["search_space"])
    job["storage"]["sweep_name"] = sweep_name
    # A reproduction checks a trial; it must not become the newest version of the model the
    # original registered (overrides can name a model to register it under).
    job.setdefault("tracking", {})["registered_model_name"] = None
    space.update(num_samples=1, points_to_evaluate=[dict(trial.hyperparameters)],
                 scheduler={"type": "fifo"}, startup_trials=None)
    return build_sweep_configs(job, space, list(overrides), job_source="sweep_config.json job",
                               space_source="sweep_config.json search_space")


@dataclasses.dataclass(frozen=True)
class Comparison:
    metric: str
    original: list[float | None]
    reproduced: list[float | None]
    tolerance: float

    @property
    def largest_difference(self) -> float:
        pairs = list(zip(self.original, self.reproduced))
        if len(self.reproduced) < len(self.original) or any(a is None or b is None for a, b in pairs):
            return math.inf
        return max((abs(a - b) for a, b in pairs), default=math.inf)

    @property
    def matched(self) -> bool:
        return self.largest_difference <= self.tolerance


def compare_trials(original: TrialRecord, reproduced: TrialRecord, metric: str, tolerance: float) -> Comparison:
    """The objective at each of the original's evaluations, against the reproduction's."""
    def values(trial: TrialRecord) -> list[float | None]:
        return [row.get(metric) for row in trial.history]

    return Comparison(metric=metric, original=values(original),
                      reproduced=values(reproduced)[:len(original.history)], tolerance=tolerance)


def format_version_changes(recorded: dict[str, str | None] | None, current: dict[str, str | None]) -> list[str]:
    """``name: recorded -> current`` for each library whose version changed since the sweep."""
    recorded = recorded or {}
    return [f"{name} {recorded.get(name)} -> {current.get(name)}" for name in sorted(set(recorded) | set(current))
            if recorded.get(name) != current.get(name)]


def format_comparison(c: Comparison, *, trial_id: str, sweep_name: str, new_sweep: str) -> list[str]:
    def fmt(values: list[float | None]) -> str:
        return " ".join("-" if v is None else f"{v:.6g}" for v in values)

    verdict = ("matched" if c.matched else "did NOT match")
    diff = "n/a (evaluations missing)" if math.isinf(c.largest_difference) else f"{c.largest_difference:.3g}"
    return [
        f"Trial {trial_id} of sweep {sweep_name}, run again as sweep {new_sweep}:",
        f"  {c.metric} at each of {len(c.original)} evaluation(s)",
        f"    original    {fmt(c.original)}",
        f"    reproduced  {fmt(c.reproduced)}",
        f"  largest difference {diff} (tolerance {c.tolerance:g}): {verdict}",
    ]
