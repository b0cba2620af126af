"""The sweep's pre-flight: every check that needs no cluster, before Ray starts and before
anything is written to storage.

The checks run cheapest first: the configs (already validated by ``load_sweep_configs``);
storage (reachable, credentials, the sweep's name, and for ``--resume`` the state Tune
restores from); the trial against this machine; the tracking server; and last the model
folder and the data, which is read and tokenized here, so every problem with its content is
found before the sweep writes its first file. These last need torch and transformers, whose
imports alone take seconds, so the cheaper refusals come without them. What passes is handed
on as a ``Preflight`` and nothing is read twice. Only the per-node check of an existing
cluster (``check_cluster_fits``) waits until Ray is connected.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ftplat.config.model_files import build_dtype_warnings, check_model_dir
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.errors import UserError
from ftplat.layout import DATA_FINGERPRINTS, build_summary_uri, build_sweep_config_uri
from ftplat.records import SweepSummary
from ftplat.ray_internals import check_ray_version, read_missing_tune_state, read_torn_tune_state
from ftplat.environment import read_machine_cpus
from ftplat.runtime import check_trial_fits_machine, read_machine_gpus, read_private_cluster_planned
from ftplat.storage import check_storage_reachable, join_uri, mask_uri_credentials, path_exists, read_json
from ftplat.tracking.runs import build_unmasked_config, check_tracking_reachable, resolve_tracking_uri
from ftplat.tune.spaces import build_scheduler
from ftplat.zero.config import build_sweep_deepspeed_configs

if TYPE_CHECKING:
    from ftplat.data.preparation import TokenizedData


@dataclass(frozen=True)
class Preflight:
    """What the checks found: the configs the sweep runs with (on ``--resume``, the stored
    ones), where it goes, its tokenized data, and warnings to log now that nothing was refused."""

    job: JobConfig
    space: SearchSpaceConfig
    sweep_name: str
    sweep_path: str
    deepspeed_configs: dict[str, dict]
    tokenized: TokenizedData
    warnings: list[str]


def build_sweep_name(job: JobConfig) -> str:
    if job.storage.sweep_name:
        return job.storage.sweep_name
    return "sweep-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def build_ephemeral_path_warnings(job: JobConfig, cwd: str) -> list[str]:
    """Paths that would land in a ``ray job submit`` working-dir copy, which Ray deletes."""
    if "working_dir_files" not in cwd:
        return []
    found = []
    if job.storage.storage_path.startswith(cwd):
        found.append(f"storage.storage_path {job.storage.storage_path!r}")
    if job.tracking.enabled:
        uri = resolve_tracking_uri(job.tracking)
        if uri.startswith("sqlite:///") and uri[len("sqlite:///"):].startswith(cwd):
            found.append(f"tracking.tracking_uri {uri!r}")
    return [f"{item} is inside the job's working-dir copy, which Ray deletes after the job; "
            "give an absolute path (or an s3:// / http:// URI)" for item in found]


def check_sweep_storage(job: JobConfig, sweep_name: str, *, resume: bool) -> str:
    """The sweep's storage URI, once storage is reachable and holds no sweep of that name (or,
    on ``--resume``, one that Tune can restore). Reads only. Raises ``UserError``."""
    storage = job.storage.storage_path
    check_storage_reachable(storage)
    sweep_path = join_uri(storage, sweep_name)
    shown = mask_uri_credentials(storage)
    exists = path_exists(build_sweep_config_uri(sweep_path))
    if exists and not resume:
        done = is_sweep_finished(sweep_path)
        raise UserError(
            f"storage.sweep_name {sweep_name!r} already exists under {shown}"
            + ("; it has finished: choose another storage.sweep_name (`ftplat sweeps show` shows it)" if done else
               "; pass --resume to continue it, or choose another storage.sweep_name")
        )
    if resume and not exists:
        raise UserError(f"--resume: no sweep {sweep_name!r} under {shown} to resume; check --name and --storage")
    if resume:
        missing = read_missing_tune_state(sweep_path)
        if missing:
            raise UserError(
                f"--resume: sweep {sweep_name!r} under {shown} has no {missing} (Tune writes its state once the "
                "trials start), so there is nothing to resume; start it again without --resume under another "
                "--name, or delete that folder first"
            )
        torn = read_torn_tune_state(sweep_path)
        if torn:
            raise UserError(
                f"--resume: sweep {sweep_name!r} under {shown}: Tune's state {torn}, and Tune would start the sweep "
                "afresh over it; if the machine that ran the sweep still has its copy "
                "(/tmp/ray/session_*/artifacts/*/driver_artifacts/ holds a file of that name), copy it over the torn "
                "one; if an older experiment_state file is beside it, delete the torn one to resume from that"
            )
        check_sweep_not_finished(sweep_path, sweep_name, shown)
    return sweep_path


def is_sweep_finished(sweep_path: str) -> bool:
    """Whether the sweep's summary says every trial ended without failing: Tune would run
    nothing on a resume, and the end of the sweep (test score, registered model) would run a
    second time. One with failed trials may be resumed: Tune runs those again."""
    if not path_exists(build_summary_uri(sweep_path)):
        return False
    try:
        summary = SweepSummary.read(sweep_path)
    except (OSError, ValueError):
        return False  # an unreadable summary is no proof the sweep ended: let Tune's state decide
    return bool(summary.trials) and all(t.status == "TERMINATED" for t in summary.trials)


def check_sweep_not_finished(sweep_path: str, sweep_name: str, shown: str) -> None:
    """Refuse to resume a finished sweep (``is_sweep_finished``)."""
    if is_sweep_finished(sweep_path):
        raise UserError(f"--resume: sweep {sweep_name!r} under {shown} has finished (summary.json: every trial ended, "
                        "none failed), so there is nothing to resume; `ftplat sweeps show` shows it, `ftplat export` "
                        "exports its winner")


def build_resumed_configs(job: JobConfig, space: SearchSpaceConfig,
                          sweep_path: str) -> tuple[JobConfig, SearchSpaceConfig, list[str]]:
    """A resumed sweep continues with the configs it started with (trials already run used
    them); a different config on the command line is reported (the warning returned) and
    ignored. Values stored masked (credentials) are taken from the config given now (or
    ``MLFLOW_TRACKING_URI``)."""
    stored = read_json(build_sweep_config_uri(sweep_path))
    stored_job = JobConfig.model_validate(build_unmasked_config(
        stored["job"], job.model_dump(mode="json"),
        fallbacks={"tracking.tracking_uri": os.environ.get("MLFLOW_TRACKING_URI")}))
    stored_space = SearchSpaceConfig.model_validate(
        build_unmasked_config(stored["search_space"], space.model_dump(mode="json"), path="search"))
    warnings = []
    if stored_job != job or stored_space != space:
        warnings.append(f"--resume: continuing with the configs stored in "
                        f"{mask_uri_credentials(build_sweep_config_uri(sweep_path))}; the ones given now differ "
                        "and are ignored")
    return stored_job, stored_space, warnings


def build_data_changes(recorded: dict[str, Any] | None, current: dict[str, Any] | None) -> list[str]:
    """``role (rows then -> rows now)`` for each tokenized split whose fingerprint
    (``build_table_fingerprint``) differs from the recorded one; none when nothing was recorded."""
    recorded, current = recorded or {}, current or {}
    return [f"{role} ({recorded[role].get('rows')} -> {current.get(role, {}).get('rows')} rows)"
            for role in sorted(recorded) if recorded[role] != current.get(role)]


def check_resumed_data(sweep_path: str, sweep_name: str, fingerprints: dict[str, Any] | None) -> None:
    """Refuse to resume on data other than the sweep's trials ran on (a source rewritten, a hub
    dataset updated under its name): the winner would be chosen across two validation sets."""
    changed = build_data_changes(read_json(build_sweep_config_uri(sweep_path)).get(DATA_FINGERPRINTS), fingerprints)
    if changed:
        raise UserError(f"--resume: sweep {sweep_name!r} ran on other data: the tokenized {', '.join(changed)} "
                        "differ from what its trials trained and were scored on; give the same data (data.source, "
                        "data.revision for a hub dataset), or run a new sweep")


#: The ``resources`` fields that size a trial: a search over one can reach a trial larger than
#: the job's own values, which no check of the job alone would refuse.
SIZING_RESOURCES = ("num_workers", "cpus_per_worker", "gpus_per_worker", "use_gpu")


def select_largest_value(param: Any) -> Any:
    """The largest value a search-space parameter can take."""
    return max(param.values) if param.type == "choice" else param.high


def build_largest_trial_job(job: JobConfig, space: SearchSpaceConfig) -> tuple[JobConfig, list[str]]:
    """The job with every searched sizing field of ``resources`` at its largest value, and the
    names of those parameters (none: the job itself)."""
    update, searched = {}, []
    for path, param in space.parameters.items():
        section, _, name = path.partition(".")
        if section == "resources" and name in SIZING_RESOURCES:
            update[name] = select_largest_value(param)
            searched.append(path)
    if not update:
        return job, []
    resources = type(job.resources).model_validate({**job.resources.model_dump(), **update})
    return job.model_copy(update={"resources": resources}), searched


def check_largest_trial_fits(job: JobConfig, space: SearchSpaceConfig, check) -> list[str]:
    """``check`` (a fit check of a job: raises ``UserError``, returns warnings) on the job, then
    on the largest trial its search can reach."""
    warnings = check(job) or []
    largest, searched = build_largest_trial_job(job, space)
    if searched:
        try:
            check(largest)
        except UserError as exc:
            raise UserError(f"search space parameters {', '.join(searched)}: the largest trial they reach (each at "
                            f"its largest value) cannot run: {exc}") from None
    return warnings


def check_trial_fits_this_machine(job: JobConfig) -> list[str]:
    """The trial against the machine a private local cluster would run on; the warnings to
    log. An existing cluster (``RAY_ADDRESS``, or Ray already initialised) is checked node by
    node once connected."""
    if not read_private_cluster_planned():
        return []
    res = job.resources
    return check_trial_fits_machine(res, cpus=read_machine_cpus(), gpus=read_machine_gpus() if res.use_gpu else 0,
                                    fp16=job.training.fp16)


def build_sweep_data(job: JobConfig) -> TokenizedData:
    """The model folder checked, and the data read, checked and tokenized."""
    from ftplat.data.preparation import build_tokenized_tables  # imports torch and transformers

    check_model_dir(job.model)
    return build_tokenized_tables(job)


def check_sweep_preflight(job: JobConfig, space: SearchSpaceConfig, *, resume: bool) -> Preflight:
    """Run every check that needs no cluster and return what they found. Nothing is written to
    storage and Ray is not started. Raises ``UserError`` naming the field and the fix."""
    check_ray_version()
    sweep_name = build_sweep_name(job)
    build_scheduler(space, job)  # ASHA settings that contradict the job config
    warnings = build_ephemeral_path_warnings(job, os.getcwd())
    sweep_path = check_sweep_storage(job, sweep_name, resume=resume)
    if resume:
        job, space, differ = build_resumed_configs(job, space, sweep_path)
        warnings += differ
    warnings += check_largest_trial_fits(job, space, check_trial_fits_this_machine) + build_dtype_warnings(job.model)
    if job.tracking.enabled:
        check_tracking_reachable(job.tracking)
    deepspeed_configs = build_sweep_deepspeed_configs(job, space.parameters)
    tokenized = build_sweep_data(job)
    if resume:
        check_resumed_data(sweep_path, sweep_name, tokenized.stats.get("fingerprints"))
    return Preflight(job=job, space=space, sweep_name=sweep_name, sweep_path=sweep_path,
                     deepspeed_configs=deepspeed_configs, tokenized=tokenized, warnings=warnings)
