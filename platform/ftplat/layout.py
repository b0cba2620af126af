"""The layout of a sweep folder: every name ftplat gives a file or folder in storage, and the
functions that build paths from them. Nothing else spells these names.

::

    {storage_path}/{sweep_name}/                 the sweep folder (Tune's experiment folder too)
        sweep_config.json                        the job config and search space it started with, and
                                                 its tokenized data's fingerprints
        summary.json                             trials, scores, winner (written when it ends)
        mlflow_runs.json                         the MLflow parent run, so --resume reopens it
        train-{trial_id}/                        one Ray Train run per trial
            checkpoint-{step}/                   one per reported evaluation (HF's own name)
            trial_result.json                    rank 0's training record
            history.json                         every evaluation, once live retention knows them all
            mlflow_runs.json                     the trial's MLflow child run

Ray's own files (``tuner.pkl``, Train's checkpoint snapshot) are named in ``ray_internals``.
"""

from __future__ import annotations

import re

from ftplat.storage import join_uri, path_exists

SUMMARY_FILE = "summary.json"
SWEEP_CONFIG_FILE = "sweep_config.json"
#: The key of ``sweep_config.json`` holding each tokenized split's rows and hash.
DATA_FINGERPRINTS = "data_fingerprints"
TRACKING_FILE = "mlflow_runs.json"
TRIAL_RESULT_FILE = "trial_result.json"
TRIAL_HISTORY_FILE = "history.json"
TRAIN_RUN_PREFIX = "train-"
#: ``transformers.trainer_utils.PREFIX_CHECKPOINT_DIR``: the worker uploads the folders the
#: Trainer writes under their own names (a test checks the two agree).
CHECKPOINT_PREFIX = "checkpoint"
_CHECKPOINT_RE = re.compile(rf"^{CHECKPOINT_PREFIX}-(\d+)$")


def build_train_run_name(trial_id: str) -> str:
    """The Train run of a trial is named by the trial id: a restarted trial finds its
    checkpoints again under the same name."""
    return f"{TRAIN_RUN_PREFIX}{trial_id}"


def parse_train_run_name(name: str) -> str | None:
    """The trial id of a Train run folder, None for any other folder."""
    return name[len(TRAIN_RUN_PREFIX):] if name.startswith(TRAIN_RUN_PREFIX) else None


def build_checkpoint_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}-{step}"


def parse_checkpoint_step(name: str) -> int | None:
    """The global step of a ``checkpoint-{step}`` folder; None for other names (Ray's default
    ``checkpoint_<timestamp>``, which an ASHA-stopped trial can leave)."""
    match = _CHECKPOINT_RE.match(name)
    return int(match.group(1)) if match else None


def is_checkpoint_folder(name: str) -> bool:
    """Any checkpoint folder in a Train run, ftplat's or Ray's default name."""
    return name.startswith(CHECKPOINT_PREFIX)


def build_summary_uri(sweep_uri: str) -> str:
    return join_uri(sweep_uri, SUMMARY_FILE)


def build_sweep_config_uri(sweep_uri: str) -> str:
    return join_uri(sweep_uri, SWEEP_CONFIG_FILE)


def build_tracking_uri(folder_uri: str) -> str:
    """The MLflow run ids kept in a sweep folder (parent) or a Train run folder (child)."""
    return join_uri(folder_uri, TRACKING_FILE)


def build_train_run_uri(sweep_uri: str, trial_id: str) -> str:
    return join_uri(sweep_uri, build_train_run_name(trial_id))


def build_trial_result_uri(run_uri: str) -> str:
    return join_uri(run_uri, TRIAL_RESULT_FILE)


def read_trial_finished(sweep_uri: str, trial_id: str) -> bool:
    """Whether the trial trained to its end: its driver writes the training record once
    ``fit()`` has returned (its workers are gone by then); a trial the scheduler stopped or
    that failed has none."""
    return path_exists(build_trial_result_uri(build_train_run_uri(sweep_uri, trial_id)))


def build_trial_history_uri(run_uri: str) -> str:
    return join_uri(run_uri, TRIAL_HISTORY_FILE)
