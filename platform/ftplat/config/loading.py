"""Reading configs from YAML and ``key=value`` overrides, with errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ftplat.config.peft_config import check_peft_method_fields
from ftplat.config.schema import JobConfig, looks_like_local_path
from ftplat.config.search_space import SearchSpaceConfig, build_default_parameter_data, check_against_job
from ftplat.config.validation_errors import SEARCH_PREFIX, build_message_source, format_validation_error, validate
from ftplat.config.yaml_input import (apply_overrides, build_literal_override, parse_override_value,
                                      build_trial_job, read_yaml, set_dotted)
from ftplat.errors import ConfigError
from ftplat.tasks import build_task
from ftplat.zero.config import build_sweep_deepspeed_configs, is_preset

__all__ = ["ConfigError", "apply_overrides", "build_literal_override", "build_sweep_configs", "build_trial_job",
           "load_sweep_configs", "parse_override_value", "read_yaml", "set_dotted", "validate"]

def check_misplaced_keys(keys: list[str], *, source: str, own: type[BaseModel], other: type[BaseModel],
                         other_name: str, fix: str) -> None:
    """Refuse top-level ``keys`` that ``own`` does not know but ``other`` does (a search space
    given as ``--config``, or the other way round), naming where they belong."""
    misplaced = [k for k in dict.fromkeys(keys) if k not in own.model_fields and k in other.model_fields]
    if misplaced:
        names = ", ".join(misplaced)
        raise ConfigError(f"{source}: {names} {'is a' if len(misplaced) == 1 else 'are'} {other_name} "
                          f"key{'' if len(misplaced) == 1 else 's'}; {fix}")


def resolve_local_paths(job: JobConfig) -> JobConfig:
    """Make local paths absolute: Ray workers run in another cwd (and on other nodes)."""

    def absolute(value: str) -> str:
        if looks_like_local_path(value) and "://" not in value:
            return str(Path(value).expanduser().resolve())
        return value

    return job.model_copy(
        update={
            "model": job.model.model_copy(update={"name_or_path": absolute(job.model.name_or_path)}),
            "data": job.data.model_copy(update={"source": absolute(job.data.source)}),
            "training": job.training.model_copy(update={"deepspeed": resolve_deepspeed_path(job.training.deepspeed)}),
            # Storage is always a filesystem path unless it is a URI, even before it exists.
            "storage": job.storage.model_copy(
                update={"storage_path": job.storage.storage_path if "://" in job.storage.storage_path
                        else str(Path(job.storage.storage_path).expanduser().resolve())}
            ),
        }
    )


def resolve_deepspeed_path(spec: str | None) -> str | None:
    if spec is None or is_preset(spec) or "://" in spec:
        return spec
    return str(Path(spec).expanduser().resolve())


def _override_keys(overrides: list[str]) -> list[str]:
    return [item.partition("=")[0].strip().split(".")[0] for item in overrides if "=" in item]


def load_sweep_configs(
    config_path: str | Path | None,
    search_space_path: str | Path | None,
    overrides: list[str] = (),
) -> tuple[JobConfig, SearchSpaceConfig]:
    """Load, override and validate the job config and the search space.

    Overrides starting with ``search.`` go to the search space, the rest to the job config.
    No file (``None``) means the embedded defaults (the IMDB recipe and its default space); an
    empty file is refused.
    """
    job_data = read_yaml(config_path, option="--config") if config_path else {}
    space_data = read_yaml(search_space_path, option="--search-space") if search_space_path else {}
    return build_sweep_configs(job_data, space_data, overrides,
                               job_source=str(config_path) if config_path else "job config",
                               space_source=str(search_space_path) if search_space_path else "search space")


def build_sweep_configs(job_data: dict[str, Any], space_data: dict[str, Any], overrides: list[str] = (), *,
                        job_source: str = "job config", space_source: str = "search space",
                        ) -> tuple[JobConfig, SearchSpaceConfig]:
    """:func:`load_sweep_configs` on YAML-shaped data already read (a sweep's recorded
    ``sweep_config.json``, for one); ``*_source`` name the data in error messages."""
    job_overrides = [o for o in overrides if not o.startswith(SEARCH_PREFIX)]
    space_overrides = [o[len(SEARCH_PREFIX) :] for o in overrides if o.startswith(SEARCH_PREFIX)]

    check_misplaced_keys(list(job_data), source=job_source, own=JobConfig, other=SearchSpaceConfig,
                         other_name="search-space", fix="pass this file with --search-space, not --config")
    check_misplaced_keys(_override_keys(job_overrides), source="override", own=JobConfig,
                         other=SearchSpaceConfig, other_name="search-space",
                         fix=f"prefix search-space overrides with {SEARCH_PREFIX!r}, e.g. search.num_samples=4")
    job_data = apply_overrides(job_data, job_overrides)
    job = resolve_local_paths(validate(JobConfig, job_data, source=job_source, overrides=job_overrides))

    check_misplaced_keys(list(space_data), source=space_source, own=SearchSpaceConfig, other=JobConfig,
                         other_name="job-config", fix="pass this file with --config, not --search-space")
    check_misplaced_keys(_override_keys(space_overrides), source="override", own=SearchSpaceConfig,
                         other=JobConfig, other_name="job-config",
                         fix=f"job-config overrides take no {SEARCH_PREFIX!r} prefix, e.g. training.learning_rate=3.0e-5")
    # The default parameters are spelled out before the overrides, so that overriding one of
    # them changes that one and keeps the others searched, with or without a file.
    if "parameters" not in space_data:
        space_data = {**space_data, "parameters": build_default_parameter_data()}
    space_data = apply_overrides(space_data, space_overrides, source="search-space override",
                                 dotted_sections=("parameters",))
    space = validate(SearchSpaceConfig, build_objective_defaults(space_data, job), source=space_source,
                     overrides=space_overrides, shown_prefix=SEARCH_PREFIX)
    try:
        check_peft_method_fields(job.model.peft, set(space.parameters))
    except ValueError as exc:
        if str(exc).startswith(SEARCH_PREFIX):
            blamed = build_message_source(str(exc), space_overrides, space_source, SEARCH_PREFIX)
        else:
            blamed = build_message_source(str(exc), job_overrides, job_source)
        raise ConfigError(f"{blamed}: {exc}") from None
    try:
        check_against_job(space, job)
    except ValueError as exc:
        raise ConfigError(f"{build_message_source(str(exc), space_overrides, space_source, SEARCH_PREFIX)}: "
                          f"{exc}") from None
    check_parameter_values(space, job, source=space_source, overrides=space_overrides)
    try:
        check_peft_zero_stage(job, build_sweep_deepspeed_configs(job, space.parameters))
    except ValueError as exc:
        raise ConfigError(f"{build_message_source(str(exc), job_overrides, job_source)}: {exc}") from None
    return job, space


def check_peft_zero_stage(job: JobConfig, deepspeed_configs: dict[str, dict]) -> None:
    """``model.peft`` trains with ZeRO stages 0-2, not 3: ZeRO-3 partitions the frozen base
    weights, which the adapter is injected into and merged with at export, and an adapter's
    optimizer state is small enough that ZeRO-2's sharding is what pays."""
    if job.model.peft is None:
        return
    for spec, config in deepspeed_configs.items():
        if (config.get("zero_optimization") or {}).get("stage") == 3:
            raise ValueError(f"training.deepspeed {spec!r} is ZeRO stage 3, which ftplat does not run with "
                             "model.peft (the base weights would be partitioned under the adapter); use the zero2 "
                             "preset, or train without model.peft")


def build_objective_defaults(space_data: dict[str, Any], job: JobConfig) -> dict[str, Any]:
    """The search space with the objective the user left out filled from the job: the metric
    that ranks checkpoints (training.metric_for_best_model), in its natural direction."""
    objective = space_data.get("objective", {})
    if not isinstance(objective, dict):
        return space_data
    metric = objective.get("metric") or job.training.metric_for_best_model
    modes = build_task(job).build_metric_modes()
    bare = str(metric).removeprefix("eval_")
    if "mode" not in objective and bare in modes:
        objective = {**objective, "mode": modes[bare]}
    return {**space_data, "objective": {**objective, "metric": metric}}


def _candidate_values(param: Any) -> list[Any]:
    return list(param.values) if param.type == "choice" else [param.low, param.high]


def check_parameter_values(space: SearchSpaceConfig, job: JobConfig, *, source: str,
                           overrides: list[str] = ()) -> None:
    """Every value a parameter can take must give a valid job config (checked at the ends of
    each range), and so must each point to evaluate, so no trial fails on a value the sweep
    itself proposed."""
    base = job.model_dump()
    for path, param in space.parameters.items():
        for value in _candidate_values(param):
            try:
                JobConfig.model_validate(set_dotted(base, {path: value}))
            except ValidationError as exc:
                blamed = build_message_source(f"parameters.{path}", list(overrides), source, SEARCH_PREFIX)
                raise ConfigError(
                    f"{blamed}: parameters.{path} can take {value!r}, which the job config refuses: "
                    f"{format_validation_error(exc)}"
                ) from None
    for i, point in enumerate(space.points_to_evaluate):
        try:
            JobConfig.model_validate(set_dotted(base, point))
        except ValidationError as exc:
            raise ConfigError(f"{source}: points_to_evaluate[{i}] gives a job config that is refused: "
                              f"{format_validation_error(exc)}") from None
