"""Every trial of a sweep as Tune's saved state knows it, read from storage alone (no Ray
connection): ``ftplat sweeps show`` for a sweep without a current summary."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from ray.tune.result import TIME_TOTAL_S, TIMESTAMP

from ftplat.layout import build_train_run_uri, build_trial_result_uri
from ftplat.ray_internals import read_trial_error, read_trial_result_rows, sort_trials_by_creation
from ftplat.records import CHECKPOINT_NAME_KEY, TrialRecord, clean_value
from ftplat.storage import path_exists, resolve_storage
from ftplat.tune.live_retention import build_live_trial_record, is_history_incomplete
from ftplat.tune.run_history import read_trainer_state_evals, read_trial_history_file
from ftplat.tune.summary import build_history_row, build_trial_history


@dataclass(frozen=True)
class TrialTiming:
    started_at: float | None = None
    #: Seconds the trial ran until its last result (Tune's ``time_total_s``).
    time_total_s: float | None = None
    #: Whether it wrote its training record (``trial_result.json``): it trained to its end.
    completed: bool = False


def _read_analysis(sweep_uri: str, attempts: int = 3):
    """Tune's view of the trials (its newest experiment state), None before Tune saved one."""
    from ray.tune import ExperimentAnalysis

    fs, path = resolve_storage(sweep_uri)
    # It also loads every trial's results, and warns about each trial that has none yet.
    tune_logger = logging.getLogger(ExperimentAnalysis.__module__)
    for attempt in range(attempts):
        level = tune_logger.level
        tune_logger.setLevel(logging.ERROR)
        try:
            return ExperimentAnalysis(path, storage_filesystem=fs)
        except json.JSONDecodeError:  # a copy still being written
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)
        except ValueError:  # Tune has saved none yet
            return None
        finally:
            tune_logger.setLevel(level)
    return None


def read_live_trials(sweep_uri: str, config: dict) -> tuple[list[TrialRecord], dict[str, TrialTiming]]:
    """Every trial Tune's saved state knows, in creation order, with its history so far: the
    complete history live retention wrote for a finished trial, else Tune's results (with the
    Trainer state of its latest checkpoint for evaluations before a resume)."""
    analysis = _read_analysis(sweep_uri)
    if analysis is None:
        return [], {}
    space, job = config["search_space"], config["job"]
    metric, best_metric = space["objective"]["metric"], job["training"]["metric_for_best_model"]
    records, timings = [], {}
    for trial in sort_trials_by_creation(analysis.trials):
        run_uri = build_train_run_uri(sweep_uri, trial.trial_id)
        results = read_trial_result_rows(trial) or []
        # Tune's saved state reads a running trial back as PENDING; its Train run folder (made
        # when its driver starts) or its results say it started.
        started = bool(results) or path_exists(run_uri)
        status = "RUNNING" if trial.status == "PENDING" and started else trial.status
        # history.json is one source, as live retention reads it: a failed trial that --resume
        # runs again evaluates past the file its failure left.
        stored = read_trial_history_file(run_uri) or []
        tune_rows = [build_history_row(r, (metric, best_metric)) for r in results if r.get(CHECKPOINT_NAME_KEY)]
        rows, evals = build_trial_history([*stored, *tune_rows]), None
        if rows and is_history_incomplete(rows):
            evals = read_trainer_state_evals(run_uri, metric)
        record = build_live_trial_record(trial.trial_id, status, rows, evals, objective_metric=metric,
                                         mode=space["objective"]["mode"], scope=space["scope"])
        record.hyperparameters = {k: clean_value(trial.config[k]) for k in space["parameters"] if k in trial.config}
        record.error = read_trial_error(trial)
        records.append(record)
        last = results[-1] if results else {}
        timings[trial.trial_id] = TrialTiming(
            started_at=last[TIMESTAMP] - last[TIME_TOTAL_S] if TIMESTAMP in last and TIME_TOTAL_S in last else None,
            time_total_s=last.get(TIME_TOTAL_S), completed=path_exists(build_trial_result_uri(run_uri)))
    return records, timings
