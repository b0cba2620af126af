"""What a sweep shows on its console while it runs, and how it tells an ended sweep from an
interrupted one: Tune's progress table and environment, one line per trial that ends."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import threading

from ray import tune

from ftplat.config.search_space import SearchSpaceConfig
from ftplat.errors import SweepInterrupted
from ftplat.layout import read_trial_finished
from ftplat.ray_internals import read_trial_error
from ftplat.records import OBJECTIVE_KEY
from ftplat.storage import mask_uri_credentials

logger = logging.getLogger("ftplat.tune.sweep")  # the sweep's own lines, under the name users filter on


#: The environment ``Tuner.fit`` runs in (a value the user set wins). ``RAY_AIR_NEW_OUTPUT=0``:
#: Tune's output that honours ``progress_reporter`` (its newer output ignores it, and shows
#: neither the objective nor the scope). The threshold 0: ftplat's schedulers save the
#: experiment state when a trial is added or ends (``SavesStateOnTrialEvents``), so one trial
#: ending as the next starts makes two saves within seconds, which Tune would report, every
#: time, as snapshots forced by ``CheckpointConfig(num_to_keep)`` (not set by ftplat) and advise
#: changing that setting. Each of these saves is a few small files.
TUNE_FIT_ENV = {"RAY_AIR_NEW_OUTPUT": "0", "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0"}


def build_progress_reporter(space: SearchSpaceConfig) -> tune.CLIReporter:
    """Tune's progress table: each trial's searched values, evaluations and scope score, best first."""
    return tune.CLIReporter(
        parameter_columns={p: p.rsplit(".", 1)[-1] for p in space.parameters},
        metric_columns={"num_evaluations": "evals", OBJECTIVE_KEY: f"{space.objective.metric}[{space.scope}]",
                        space.objective.metric: space.objective.metric},
        sort_by_metric=True, max_report_frequency=30)  # metric and mode: Tune sets TuneConfig's


class TrialEndLogCallback(tune.Callback):
    """One line when a trial ends: finished, stopped by the scheduler, or failed and why."""

    def __init__(self, *, sweep_path: str, metric: str, scope: str):
        self.sweep_path, self.metric, self.scope = sweep_path, metric, scope

    def _so_far(self, trial) -> str:
        result = trial.last_result or {}
        score = result.get(OBJECTIVE_KEY)
        shown = f"{score:.4g}" if isinstance(score, (int, float)) else "-"
        return f"{result.get('num_evaluations') or 0} evaluation(s), {self.metric}[{self.scope}]={shown}"

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        # A log line: storage unreadable for a moment must not raise into Tune, which ends the sweep.
        try:
            how = "finished" if read_trial_finished(self.sweep_path, trial.trial_id) else "stopped by the scheduler"
        except OSError:
            how = "ended"
        logger.info("Trial %s %s: %s", trial.trial_id, how, self._so_far(trial))

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        # Storage gets Tune's error file at its next sync: until then only Tune's own log has it.
        why = read_trial_error(trial) or "error (details in the trial folder)"
        logger.info("Trial %s failed after %s: %s", trial.trial_id, self._so_far(trial), why)


def build_resume_args(sweep_name: str, storage_path: str) -> str:
    """``--resume --name NAME --storage STORAGE``: what continues the sweep from any directory
    (a relative storage path as this driver resolved it; URI credentials masked)."""
    if "://" not in storage_path:
        storage_path = os.path.abspath(os.path.expanduser(storage_path))
    return f"--resume --name {shlex.quote(sweep_name)} --storage {shlex.quote(mask_uri_credentials(storage_path))}"


def check_sweep_ended(trials: list, sweep_name: str, num_samples: int, storage_path: str) -> None:
    """Raise ``SweepInterrupted`` when a trial has not ended, or the search has not made all
    ``num_samples`` trials. On Ctrl-C Tune saves its state and returns from ``fit()`` as if
    the sweep were done; scoring the test split, retention's final pass and registering a
    winner then would act on a sweep ``--resume`` is to continue. A stop between two trials
    leaves every trial made so far ended: only the count tells (nothing else ends a search
    early: no stopper, no fail_fast, and neither searcher runs out)."""
    unfinished = [t.trial_id for t in trials if t.status not in ("TERMINATED", "ERROR")]
    missing = max(num_samples - len(trials), 0)
    if unfinished or missing:
        parts = [f"{len(unfinished)} trial(s) not ended ({', '.join(unfinished[:5])}"
                 f"{', ...' if len(unfinished) > 5 else ''})"] if unfinished else []
        parts += [f"{missing} of its {num_samples} trials not started"] if missing else []
        raise SweepInterrupted(
            f"sweep {sweep_name} was interrupted with {' and '.join(parts)}; its state is saved: continue "
            f"it with {build_resume_args(sweep_name, storage_path)} (no test score, final retention or registered "
            "model yet)")


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """SIGTERM (``kill``, ``ray job stop``, a scheduler preempting the driver) handled as Ctrl-C
    while the block runs: Tune saves its state and the sweep ends with the ``--resume`` line and
    exit 130. Ray's own handler aborted the driver with a native stack dump. Entered after Ray
    starts (``ray.init`` installs that handler); only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
