"""Reading configs from YAML and ``key=value`` overrides, with errors that name the field."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ftplat.config.hf_args import build_training_key_hint
from ftplat.config.peft_config import check_peft_method_fields
from ftplat.config.schema import JobConfig, looks_like_local_path
from ftplat.config.training_config import TrainingConfig
from ftplat.config.search_space import (SearchSpaceConfig, build_default_parameter_data,
                                         check_against_job)
from ftplat.config.yaml_input import (FLOAT_TEXT_RE, apply_overrides, build_literal_override, parse_override_value,
                                      build_trial_job, read_yaml, set_dotted)
from ftplat.errors import ConfigError
from ftplat.tasks import build_task
from ftplat.zero.config import build_sweep_deepspeed_configs, is_preset

__all__ = ["ConfigError", "apply_overrides", "build_literal_override", "build_sweep_configs", "build_trial_job",
           "load_sweep_configs", "parse_override_value", "read_yaml", "set_dotted", "validate"]

M = TypeVar("M", bound=BaseModel)

#: Prefix that sends a command-line override to the search space instead of the job config.
SEARCH_PREFIX = "search."


def _describe_input(value: Any) -> str:
    if isinstance(value, str) and FLOAT_TEXT_RE.match(value.strip()):
        return f"got the string {value!r}: write it as a YAML number such as 1.0e-5 (with a dot)"
    text = repr(value)
    return f"got {text if len(text) <= 60 else text[:57] + '...'}"


def _quote_hint(value: Any) -> str:
    """What to write when YAML read a text field's value as a date, number or boolean."""
    shown = str(value) if isinstance(value, (dt.date, int, float)) and not isinstance(value, bool) else "..."
    return (f"YAML reads that as {type(value).__name__}: quote the value to keep it text ('{shown}' in a file, "
            f"\"'{shown}'\" after the = of an override)")


#: A dotted field name in a message (``resources.use_gpu``).
DOTTED_NAME_RE = re.compile(r"\b[a-z_]+(?:\.[a-z_0-9]+)+\b")


def build_error_path(err: dict[str, Any]) -> str:
    """The YAML path of one pydantic error (empty for a rule across sections)."""
    loc = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
    # Discriminated unions put the tag name in the path; it is not a YAML key.
    return ".".join(p for p in loc if p not in {"loguniform", "uniform", "int", "choice", "fifo", "asha"})


def select_blamed_overrides(paths: list[str], overrides: list[str], shown_prefix: str = "") -> list[str]:
    """The ``key=value`` overrides that set the fields at ``paths``, as the user wrote them
    (``shown_prefix``: ``search.``). A path of a field (``training.hf_args``) blames an override
    inside it; one of a whole section (``model``: a rule across its fields) blames none, since
    the file's fields may be the ones at fault."""
    blamed = []
    for path in paths:
        for override in overrides:
            key = override.partition("=")[0].strip()
            inside = "." in path and key.startswith(path + ".")
            if path and (path == key or path.startswith(key + ".") or inside):
                blamed.append(shown_prefix + override.strip())
    return list(dict.fromkeys(blamed))


def build_blamed_source(exc: ValidationError, overrides: list[str], source: str, shown_prefix: str = "") -> str:
    """What an error message names as its input: the overrides that set the fields it is about
    (a file that holds a valid value is not to blame), else ``source``."""
    paths = []
    for err in exc.errors():
        path = build_error_path(err)
        # A rule across sections names its fields in the message (training.fp16 ... resources.use_gpu)
        paths += [path] if path else DOTTED_NAME_RE.findall(err["msg"])
    blamed = select_blamed_overrides(paths, overrides, shown_prefix)
    return f"override {', '.join(blamed)}" if blamed else source


def build_message_source(message: str, overrides: list[str], source: str, shown_prefix: str = "") -> str:
    """``build_blamed_source`` for a check that runs after the schema's: its message begins with
    the path it is about (``search space parameters.<path>:``, ``model.peft.r applies ...``)."""
    path = message.removeprefix("search space ").split(":", 1)[0].split(" ", 1)[0].removeprefix(SEARCH_PREFIX)
    blamed = select_blamed_overrides([path], overrides, shown_prefix)[:1]
    return f"override {blamed[0]}" if blamed else source


def build_unknown_key_message(path: str) -> str:
    """What an unknown key's error says: where a TrainingArguments name lives for
    ``training.<name>``, else to check the spelling."""
    section, _, name = path.partition(".")
    if section == "training" and name and "." not in name:
        hint = build_training_key_hint(name, own_fields=set(TrainingConfig.model_fields))
        if hint:
            return f"unknown key; {hint}"
    return "unknown key (check the spelling; see the config reference in README.md)"


def format_validation_error(exc: ValidationError, *, prefix: str = "") -> str:
    """One line per problem: ``<yaml.path>: <what is wrong>; <what was given>``."""
    lines = []
    for err in exc.errors():
        loc = build_error_path(err)
        path = ".".join([prefix, loc] if prefix and loc else [prefix or loc])
        kind = err["type"]
        msg = err["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            msg = build_unknown_key_message(path)
        elif kind in {"float_type", "int_type", "bool_type", "string_type", "literal_error"} or kind.endswith("_parsing"):
            msg = f"{msg}; {_describe_input(err.get('input'))}"
            if kind == "string_type" and isinstance(err.get("input"), (dt.date, int, float)):
                msg = f"{msg}; {_quote_hint(err['input'])}"
        # A rule across sections (JobConfig's own validators) names its fields in the message.
        lines.append(f"{path}: {msg}" if path else msg)
    return "; ".join(lines)


def validate(model: type[M], data: Any, *, source: str, prefix: str = "", overrides: list[str] = (),
             shown_prefix: str = "") -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{build_blamed_source(exc, list(overrides), source, shown_prefix)}: "
                          f"{format_validation_error(exc, prefix=prefix)}") from None


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
