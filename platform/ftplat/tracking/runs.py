"""MLflow runs of a sweep: the parent run (sweep driver) and one child run per trial.

Run ids are kept in the sweep's storage, so a resumed sweep or a restarted trial continues
the same runs instead of creating new ones. Only the sweep driver creates runs, the trials'
through its ``TrialRuns`` actor (``ftplat.tracking.trial_runs``), which also makes the calls of
each trial's driver and rank 0 (``ftplat.tracking.callback``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from ftplat.config.schema import TrackingConfig
from ftplat.environment import scoped_environ
from ftplat.errors import UserError
from ftplat.layout import SWEEP_CONFIG_FILE, build_tracking_uri
from ftplat.storage import URI_USERINFO, path_exists, read_json, write_json
from ftplat.tracking.tags import build_resumed_tags, build_run_tags

logger = logging.getLogger(__name__)
PARENT_RUN_TAG = "mlflow.parentRunId"
# Whole name segments only: "hub_token" is a secret, "average_tokens_across_devices" is not.
_SECRET_KEY = re.compile(
    r"(?:^|[._-])(?:token|secret|password|passwd|credentials?|api[_-]?key|access[_-]?key|secret[_-]?key)(?:$|[._-])",
    re.I,
)
_FAIL_FAST_REQUESTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


def resolve_tracking_uri(cfg: TrackingConfig) -> str:
    """Absolute tracking URI: workers run in another cwd, so ``sqlite:///mlflow.db`` would
    point each of them at a different file."""
    uri = cfg.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    return uri


def build_artifact_location(tracking_uri: str, experiment_name: str) -> str | None:
    """Where a new experiment keeps artifacts: beside a local sqlite store (MLflow would use
    ``./mlruns`` of whichever process creates it); a server decides for itself."""
    if tracking_uri.startswith("sqlite:///"):
        root = Path(tracking_uri[len("sqlite:///"):]).parent / "mlartifacts" / experiment_name
        return root.as_uri()
    return None


def redact(key: str, value: Any) -> Any:
    """Hide secrets: values of secret-looking keys, and credentials inside URIs."""
    if _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, str):
        return URI_USERINFO.sub("***@", value)
    return value


def redact_text(text: str) -> str:
    """Mask credentials inside any URI in ``text`` (log lines, error messages)."""
    return URI_USERINFO.sub("***@", text)


def format_error_line(exc: BaseException) -> str:
    """``Type: first line``; a message that is a traceback (Tune's ``TuneError``) gives its
    last unindented line, the error it ends with."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = [ln for ln in lines if not ln[0].isspace()][-1:]
    return f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__


def format_error(exc: BaseException) -> str:
    """An exception as one short line, credentials in URIs masked; a wrapper's explicit cause
    (``raise ... from``: optuna's StorageInternalError over sqlite's "database or disk is
    full") follows it, since the wrapper alone rarely says what to fix."""
    text, root, seen = format_error_line(exc), exc, {id(exc)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    if root is not exc:
        text = f"{text} (caused by {format_error_line(root)})"
    return redact_text(text[:300])


def redact_config(value: Any, key: str = "") -> Any:
    """``redact`` applied through nested dicts and lists (configs, summaries), keyed by the
    innermost key, so ``{"hf": {"hub_token": ...}}`` is masked like ``hf.hub_token``."""
    if key and _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, dict):
        return {k: redact_config(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_config(v, key) for v in value]
    return redact(key, value)


def build_unmasked_config(stored: Any, given: Any, *, path: str = "",
                          fallbacks: dict[str, str | None] | None = None) -> Any:
    """A stored config (masked by ``redact_config``) with each masked value taken from the
    config given now, which must mask to the same text; ``fallbacks`` maps a dotted path to the
    value that a ``None`` there stands for (the tracking URI from ``MLFLOW_TRACKING_URI``)."""
    if isinstance(stored, dict) and isinstance(given, dict):
        return {k: build_unmasked_config(v, given.get(k), path=f"{path}.{k}".lstrip("."), fallbacks=fallbacks)
                for k, v in stored.items()}
    if "***" not in json.dumps(stored, default=str):
        return stored
    key = path.rsplit(".", 1)[-1]
    if redact_config(given, key) == stored:
        return given
    fallback = (fallbacks or {}).get(path)
    if given is None and fallback is not None and redact_config(fallback, key) == stored:
        return None
    raise UserError(f"--resume: {path} is stored masked as {stored!r}; give it again with its credentials "
                    f"({path}=...)")


def build_client(tracking_uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


@contextlib.contextmanager
def fail_fast_requests():
    """MLflow's HTTP client makes one quick attempt inside this block, not minutes of retries.

    MLflow reads these variables on every request, so they are restored when the block ends:
    left set, they would reach every later call of the process (and, set before Ray starts,
    every worker of a private cluster), where one transient 5xx would then fail the call.
    A value the user set is kept.
    """
    with scoped_environ(_FAIL_FAST_REQUESTS, keep_set=True):
        yield


def run_probe(uri: str) -> None:
    """One quick request to the tracking store; raises what MLflow raises when it is unusable."""
    with fail_fast_requests():
        build_client(uri).search_experiments(max_results=1)


def read_local_store(uri: str) -> str | None:
    """The absolute file or folder of a local tracking store (``sqlite:///``, ``file:``, a bare
    path), existing or not; None for a server (``http://``, ``databricks``)."""
    from mlflow.utils.uri import is_local_uri

    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):].split("?", 1)[0]
    elif uri.startswith("file:") or ("://" not in uri and is_local_uri(uri)):  # not "databricks"
        path = uri[len("file://"):] if uri.startswith("file://") else uri.removeprefix("file:")
    else:
        return None
    return os.path.abspath(os.path.expanduser(path))


def read_new_local_store(uri: str) -> str | None:
    """The file or folder of a local tracking store that does not exist yet, else None."""
    path = read_local_store(uri)
    return None if path is None or os.path.exists(path) else path


def check_tracking_names(cfg: TrackingConfig) -> None:
    """The experiment and registered-model names by MLflow's own rules (``UserError`` naming
    the field): MLflow refused a bad experiment name after Ray had started, and a bad model
    name at registration, after every trial had trained."""
    from mlflow.exceptions import MlflowException

    try:
        from mlflow.utils.validation import _validate_experiment_name, _validate_model_name
    except ImportError:  # MLflow's private helpers: a release without them leaves the names to MLflow
        return
    checks = [("tracking.experiment_name", cfg.experiment_name, _validate_experiment_name, "give a non-empty name")]
    if cfg.registered_model_name is not None:
        checks.append(("tracking.registered_model_name", cfg.registered_model_name, _validate_model_name,
                       "give a name without '/' or ':' (team-imdb-sentiment), or null to skip registration"))
    for field, value, validate, fix in checks:
        try:
            validate(value)
        except MlflowException as exc:
            raise UserError(f"{field} {value!r}: {exc.message.rstrip('.')}; {fix}") from None


def check_file_store(uri: str, path: str) -> None:
    """MLflow 3 refuses to open a folder store (``./mlruns``, ``file:``, a bare path) unless
    ``MLFLOW_ALLOW_FILE_STORE`` is true; found when the sweep's parent run started, after
    Ray had started and the sweep folder was written (and a rerun under its name refused)."""
    from mlflow.environment_variables import MLFLOW_ALLOW_FILE_STORE

    if uri.startswith("sqlite:///") or MLFLOW_ALLOW_FILE_STORE.get():
        return
    raise UserError(f"tracking.tracking_uri {redact_text(uri)!r} is a folder store, which MLflow 3 no longer opens; "
                    f"give a database such as 'sqlite:///{path if path.endswith('.db') else path + '.db'}' "
                    "(or a tracking server; `mlflow migrate-filestore` moves an existing store's runs), or set "
                    "MLFLOW_ALLOW_FILE_STORE=true to use the folder store")


def check_tracking_settings(cfg: TrackingConfig) -> str:
    """What needs no tracking server (the names, a folder store); the tracking URI."""
    check_tracking_names(cfg)
    uri = resolve_tracking_uri(cfg)
    local = read_local_store(uri)
    if local is not None:
        check_file_store(uri, local)
    return uri


def check_tracking_reachable(cfg: TrackingConfig) -> str:
    """Fail fast (``UserError`` naming the field) when the tracking server cannot be used. A
    local store that does not exist yet is not opened (MLflow would create it, and a sweep
    refused by a later check must leave nothing written): its nearest existing folder must be
    one this process can write in."""
    uri = check_tracking_settings(cfg)
    new = read_new_local_store(uri)
    if new is not None:
        parent = os.path.dirname(new)
        while not os.path.exists(parent) and os.path.dirname(parent) != parent:
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            raise UserError(f"tracking.tracking_uri {redact_text(uri)!r} cannot be created: {parent!r} is not a "
                            "folder this process can write in; give a writable path, a tracking server, or set "
                            "tracking.enabled=false")
        return uri
    try:
        run_probe(uri)
    except Exception as exc:  # MLflow raises many types for an unusable store
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise UserError(
            f"tracking.tracking_uri {redact_text(uri)!r} is not usable ({redact_text(first[:200])}); "
            "start the server, fix the URI, or set tracking.enabled=false"
        ) from None
    return uri


def run_start_parent(cfg: TrackingConfig, *, sweep_name: str, sweep_path: str, params: dict[str, Any],
                     config_json: dict[str, Any], dashboard_url: str | None) -> dict[str, str]:
    """Create the sweep's parent run, or reopen the one a previous driver created."""
    uri = resolve_tracking_uri(cfg)
    client = build_client(uri)
    ids_uri = build_tracking_uri(sweep_path)
    if path_exists(ids_uri):
        ids = read_json(ids_uri)
        # The stored URI has its credentials masked; the live one is the URI configured now.
        if redact_text(ids["tracking_uri"]) != redact_text(uri):
            raise UserError(
                f"--resume: the sweep's MLflow runs are in {redact_text(ids['tracking_uri'])!r} but "
                f"tracking.tracking_uri is now {redact_text(uri)!r}; give the sweep's tracking URI, with its "
                "credentials (tracking.tracking_uri or MLFLOW_TRACKING_URI)"
            )
        client.update_run(ids["parent_run_id"], status="RUNNING")
        old_tags = client.get_run(ids["parent_run_id"]).data.tags
        for key, value in build_resumed_tags(old_tags, build_run_tags(sweep_name, dashboard_url=dashboard_url)).items():
            client.set_tag(ids["parent_run_id"], key, value)
        logger.info("Continuing MLflow parent run %s", ids["parent_run_id"])
        return {**ids, "tracking_uri": uri}
    experiment = client.get_experiment_by_name(cfg.experiment_name)
    experiment_id = (
        experiment.experiment_id
        if experiment
        else client.create_experiment(
            cfg.experiment_name, artifact_location=build_artifact_location(uri, cfg.experiment_name)
        )
    )
    run = client.create_run(experiment_id, run_name=sweep_name,
                            tags=build_run_tags(sweep_name, dashboard_url=dashboard_url))
    log_params(client, run.info.run_id, params)
    client.log_dict(run.info.run_id, redact_config(config_json), SWEEP_CONFIG_FILE)
    ids = {"tracking_uri": uri, "experiment_id": experiment_id, "parent_run_id": run.info.run_id}
    write_json(ids_uri, redact_config(ids))
    logger.info("MLflow parent run %s in experiment %r at %s", run.info.run_id, cfg.experiment_name,
                redact_text(uri))
    return ids


def log_params(client, run_id: str, params: dict[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(k, str(redact(k, v))[:6000]) for k, v in params.items()]
    for start in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
        client.log_batch(run_id, params=items[start : start + 100])


def run_start_trial(tracking: dict[str, str], *, trial_id: str, run_uri: str, params: dict[str, Any],
                    client=None) -> str:
    """The trial's child run id: created once, found again in storage after a restart."""
    ids_uri = build_tracking_uri(run_uri)
    client = client or build_client(tracking["tracking_uri"])
    if path_exists(ids_uri):
        run_id = read_json(ids_uri)["run_id"]
        client.update_run(run_id, status="RUNNING")
    else:
        run_id = client.create_run(
            tracking["experiment_id"],
            run_name=f"trial-{trial_id}",
            tags={PARENT_RUN_TAG: tracking["parent_run_id"], "ftplat.trial_id": trial_id},
        ).info.run_id
        # Recorded before anything is logged into it: a restart after a failure below finds
        # this run instead of making a second one.
        write_json(ids_uri, {"run_id": run_id})
    log_params(client, run_id, params)  # the same values again after a restart: MLflow accepts them
    return run_id


def run_end_parent(tracking: dict[str, str], status: str) -> None:
    """End the parent run with ``status``, best effort: never raises, so an MLflow error cannot
    hide the sweep's own. A quick probe first: a dead server costs seconds, not MLflow's retries."""
    try:
        run_probe(tracking["tracking_uri"])
        build_client(tracking["tracking_uri"]).set_terminated(tracking["parent_run_id"], status)
    except Exception as exc:  # MLflow raises many types for an unusable store
        logger.warning("Could not mark the MLflow parent run %s %s (%s)", tracking["parent_run_id"], status,
                       format_error(exc))


def find_trial_run_id(run_uri: str) -> str | None:
    ids_uri = build_tracking_uri(run_uri)
    return read_json(ids_uri)["run_id"] if path_exists(ids_uri) else None
