"""Exporting a sweep's winner as a ready Hugging Face model directory with a model card
(``ftplat.checkpoints.card``), and pushing it to the hub.

Beside the model files, ``ftplat_task.json`` (``ftplat.checkpoints.task_file``) names the
job's task and its settings, so ``ftplat predict`` and the MLflow model serve the export as the
task it was trained for.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ftplat.checkpoints.card import build_card_data, build_card_document, build_model_card, build_weights_section
from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.checkpoints.task_file import build_task_settings, read_sweep_config, run_write_task_file
from ftplat.config.loading import build_trial_job
from ftplat.errors import UserError
from ftplat.layout import build_train_run_uri
from ftplat.records import SweepSummary
from ftplat.storage import join_uri, path_exists
from ftplat.tasks import build_task

EXPORT_RECORD = "ftplat_export.json"


def run_export(sweep_uri: str, out_dir: str, *, adapter_only: bool = False) -> dict[str, Any]:
    """Write the winner of a finished sweep to ``out_dir``; return the exported trial record.
    A peft sweep's winner is merged into its base model, or with ``adapter_only`` exported
    as the adapter alone (the card names the base model it needs)."""
    out_dir = os.path.expanduser(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"OUT_DIR {out_dir!r} is a file; give a new or empty folder")
    summary = SweepSummary.read(sweep_uri)
    trial = summary.winner_trial()
    if trial is None or trial.best_checkpoint is None:
        raise UserError(f"sweep {sweep_uri!r} has no winner with a checkpoint to export")
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise UserError(f"OUT_DIR {out_dir!r} exists and is not empty; choose a new folder")
    # Under SWEEP as given: the recorded path is where the driver saw the sweep, which another
    # machine (another mount, a copied folder) does not have.
    checkpoint_uri = join_uri(build_train_run_uri(sweep_uri, trial.trial_id), trial.best_checkpoint.name)
    if not path_exists(checkpoint_uri):
        raise UserError(f"the winner's best checkpoint {trial.best_checkpoint.name} (trial {trial.trial_id}) is not "
                        f"in {sweep_uri!r}: {checkpoint_uri!r} does not exist (deleted, or a copy without it); "
                        "give the sweep folder that holds it")
    sweep_config = read_sweep_config(sweep_uri)
    settings = build_task_settings(sweep_config, summary)
    card = build_model_card(summary, trial, sweep_config)  # before copying: a failure leaves OUT_DIR empty
    job = (sweep_config or {}).get("job")
    # The winner's own job: its searched values (model.peft.r...) are what the card must name.
    winner_job = build_trial_job(job, trial.hyperparameters) if job else job
    weights = run_write_model_dir(checkpoint_uri, out_dir, winner_job,
                                  adapter_only=adapter_only)
    if weights["weights"] != "adapter" and winner_job:
        build_task(settings).run_complete_export(out_dir, winner_job)
    card += build_weights_section(weights, build_task(settings).auto_model)
    card_data = build_card_data(summary, trial, build_task(settings), (sweep_config or {}).get("job") or {}, weights)
    run_write_task_file(out_dir, settings)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(build_card_document(card_data, card))
    trial_dict = trial.to_dict()
    record = {"sweep": summary.sweep_name, "scope": summary.scope, "task": settings,
              "objective": {"metric": summary.objective.metric, "mode": summary.objective.mode},
              "trial": {k: trial_dict[k] for k in ("trial_id", "hyperparameters", "scores", "best_checkpoint")},
              "weights": weights}
    record["trial"]["best_checkpoint"] = {**record["trial"]["best_checkpoint"], "path": checkpoint_uri}
    if summary.test is not None:
        record["test"] = summary.test
    with open(os.path.join(out_dir, EXPORT_RECORD), "w") as f:
        json.dump(record, f, indent=2)
    return record


def run_push_to_hub(out_dir: str, repo_id: str, *, private: bool = False) -> str:
    """Upload the export folder ``out_dir`` to the hub model repo ``repo_id`` (created if
    missing); return the commit's URL. The token comes from huggingface_hub's usual sources
    (HF_TOKEN, ``hf auth login``). An unreachable hub or a refused token is a UserError."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        # The export record names this machine's checkpoint paths: it stays local.
        commit = api.upload_folder(repo_id=repo_id, folder_path=os.path.expanduser(out_dir), repo_type="model",
                                   commit_message="ftplat export", ignore_patterns=[EXPORT_RECORD])
    except OfflineModeIsEnabled as exc:
        raise UserError(f"the hub is offline (HF_HUB_OFFLINE=1): {exc}") from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        hint = " (log in with `hf auth login` or set HF_TOKEN to a token that may write there)" \
            if status in (401, 403) else ""
        raise UserError(f"the hub answered {status}: {str(exc).splitlines()[0]}{hint}") from exc
    except _hub_transport_error() as exc:
        raise UserError(f"the hub cannot be reached at {api.endpoint}: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:  # huggingface_hub's own errors for a missing token or an unreadable folder
        raise UserError(f"{type(exc).__name__}: {exc}") from exc
    return commit.commit_url


def _hub_transport_error() -> type[Exception]:
    """The HTTP client's base error that huggingface_hub lets through on a refused connection
    (``ConnectError``): httpx2 in the huggingface_hub releases that depend on it, httpx before."""
    try:
        from httpx2 import HTTPError
    except ImportError:
        from httpx import HTTPError
    return HTTPError
