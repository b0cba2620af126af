"""What a sweep would do, worked out without starting it: the plan ``--dry-run`` prints, and
the warning for a GPU-sized sweep about to run on CPUs.

Everything here reads configs, the machine and local files only: no Ray cluster is started
and nothing is written (no storage folder, no MLflow store, no logs).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import yaml

from ftplat.config.model_files import build_dtype_warnings, check_model_dir
from ftplat.config.schema import JobConfig, looks_like_local_path
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.ray_internals import check_ray_version
from ftplat.tracking.runs import check_tracking_settings
from ftplat.tune.preflight import (build_ephemeral_path_warnings, build_largest_trial_job, build_sweep_name,
                                   check_largest_trial_fits, check_sweep_storage, check_trial_fits_this_machine,
                                   select_largest_value)
from ftplat.tune.spaces import build_max_evaluations, build_scheduler
from ftplat.units import format_bytes

#: Bytes per parameter: weights as saved (float32), and AdamW's two float32 moments.
WEIGHT_BYTES = 4
OPTIMIZER_BYTES = 8
#: Trained tokens x parameters from which a sweep is GPU-sized: the embedded default
#: (bert-base, all of IMDB, 3 epochs, 8 trials) is about 1e16, the CPU profile
#: (jobs/configs/imdb_cpu.yaml) about 1e13, which 2 CPU cores run in minutes.
GPU_SIZED_WORK = 1e15
#: Sizes of the embedded default's model and train split, for when they cannot be read
#: offline (the hub is not in the cache): the warning must not depend on the network.
KNOWN_PARAMETERS = {"bert-base-uncased": 109_482_240}
KNOWN_TRAIN_ROWS = {"stanfordnlp/imdb": 25_000}
CPU_PROFILE = "jobs/configs/imdb_cpu.yaml"
#: The shipped CPU-sized recipe of a task, the warning's suggestion (job config, search space).
CPU_RECIPES = {"text-classification": (CPU_PROFILE, "search_spaces/imdb_cpu.yaml"),
               "masked-lm": ("jobs/configs/masked_lm_imdb_unsup_cpu.yaml",
                             "search_spaces/masked_lm_imdb_unsup_cpu.yaml")}


@dataclass(frozen=True)
class ParameterCount:
    """The model's parameters (``trainable`` < ``total`` with a peft adapter), or why unknown."""

    total: int | None = None
    trainable: int | None = None
    unknown: str | None = None
    #: Which searched values it was counted at (the largest of those that size a checkpoint).
    at: str | None = None


def read_parameter_count(job: JobConfig) -> ParameterCount:
    """Counted on an empty (meta-device) model built from the config found offline (a local
    folder or the Hugging Face cache) as the workers build it: the task's class and head (a
    classifier's labels, a causal LM's untied output layer), then the peft adapter or
    ``model.trainable_patterns``. Nothing is downloaded and no weights are read."""
    import torch
    import transformers

    from ftplat.adapters import build_peft_config, count_parameters, quiet_peft_model_warnings
    from ftplat.tasks import build_task
    from ftplat.train.modeling import apply_trainable_patterns

    name, task = job.model.name_or_path, build_task(job)
    try:
        config = transformers.AutoConfig.from_pretrained(name, local_files_only=True,
                                                         trust_remote_code=job.model.trust_remote_code,
                                                         **task.build_model_kwargs(job.model),
                                                         **job.model.config_overrides)
        with torch.device("meta"):
            model = getattr(transformers, task.auto_model).from_config(
                config, trust_remote_code=job.model.trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - any reason the config cannot be read makes the size unknown
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        return ParameterCount(unknown=f"the config of model.name_or_path {name!r} cannot be read offline ({reason})")
    total = sum(p.numel() for p in model.parameters())
    if job.model.peft is None:
        if not job.model.trainable_patterns:
            return ParameterCount(total=total, trainable=total)
        try:
            return ParameterCount(total=total, trainable=apply_trainable_patterns(model, job.model.trainable_patterns))
        except ValueError as exc:
            return ParameterCount(total=total, unknown=str(exc))
    try:
        import peft

        peft_config = build_peft_config(job.model.peft, task_type=task.peft_task_type, model=model)
        with quiet_peft_model_warnings():
            adapter = peft.get_peft_model(model, peft_config)
        trainable, _ = count_parameters(adapter)
    except Exception as exc:  # noqa: BLE001 - an adapter the meta model refuses leaves the size unknown
        return ParameterCount(total=total, unknown=f"the model.peft adapter could not be sized ({exc})")
    return ParameterCount(total=total, trainable=trainable)


#: Searched fields that change what a checkpoint holds: the estimate sizes their largest value.
SIZING_PARAMETERS = ("model.peft.r",)


def build_largest_checkpoint_job(job: JobConfig, space: SearchSpaceConfig) -> tuple[JobConfig, list[str]]:
    """The job with each searched ``SIZING_PARAMETERS`` field at its largest value (an
    adapter of rank 32 is twice rank 16's), and those fields' names."""
    from ftplat.config.loading import build_trial_job

    largest = {path: select_largest_value(param) for path, param in space.parameters.items()
               if path in SIZING_PARAMETERS}
    if not largest:
        return job, []
    return JobConfig.model_validate(build_trial_job(job.model_dump(), largest)), sorted(largest)


def read_largest_parameter_count(job: JobConfig, space: SearchSpaceConfig) -> ParameterCount:
    """``read_parameter_count`` of the largest checkpoint a trial of the search can write."""
    largest, searched = build_largest_checkpoint_job(job, space)
    count = read_parameter_count(largest)
    if searched and count.unknown is None:
        return replace(count, at=f"{', '.join(searched)} at the largest")
    return count


def build_checkpoints_kept(job: JobConfig, space: SearchSpaceConfig) -> tuple[int | None, int | None]:
    """Checkpoints in storage for the whole sweep: while it runs (every trial at
    training.save_total_limit) and after the final retention pass. None when unbounded."""
    t, r = job.training, job.retention
    # HF keeps the best beside the newest whenever metric_for_best_model is set (ftplat always
    # sets it), so a limit of 1 keeps 2, with or without load_best_model_at_end.
    per_trial = max(t.save_total_limit, 2)
    evaluations = build_max_evaluations(job)
    if evaluations is not None:
        per_trial = min(per_trial, evaluations)
    peak = space.num_samples * per_trial
    if r.keep_top_k_trials is None or not r.apply_at_end:
        return peak, peak
    top = min(r.keep_top_k_trials, space.num_samples)
    others = min(per_trial, int(r.keep_trial_best) + int(r.keep_trial_latest))
    return peak, top * per_trial + (space.num_samples - top) * others


def build_storage_estimate(job: JobConfig, space: SearchSpaceConfig, count: ParameterCount) -> dict:
    """Bytes the sweep's checkpoints take, with and without the optimizer state."""
    peak, final = build_checkpoints_kept(job, space)
    if count.unknown or count.trainable is None:
        return {"unknown": count.unknown or "the parameter count is unknown"}
    # A peft checkpoint holds the adapter (and the head), not the frozen base model.
    saved = count.trainable if job.model.peft is not None else count.total
    # A whole model trained in bfloat16 saves it and its AdamW moments in bfloat16; an adapter
    # and its head train in float32 whatever the base's dtype ("auto" is taken as float32).
    half = 2 if job.model.dtype == "bfloat16" and job.model.peft is None else 1
    weights = saved * WEIGHT_BYTES // half
    optimizer = count.trainable * OPTIMIZER_BYTES // half
    # Completed trials' checkpoints lose their optimizer state (checkpoints/strip.py), except
    # DeepSpeed's, whose shards can hold the only full copy of the weights.
    kept_optimizer = optimizer if job.retention.keep_optimizer_state or job.training.deepspeed else 0
    estimate = {"parameters": count.total, "trainable_parameters": count.trainable,
                "checkpoint_bytes": weights, "checkpoint_bytes_with_optimizer": weights + optimizer,
                "checkpoints_while_running": peak, "checkpoints_after_retention": final,
                "sweep_bytes_while_running": peak * (weights + optimizer),
                "sweep_bytes_after_retention": final * (weights + kept_optimizer),
                "sweep_bytes_without_optimizer": peak * weights}
    if count.at:
        estimate["at"] = count.at
    if job.training.deepspeed:
        estimate["note"] = "DeepSpeed checkpoints shard the optimizer state; the total is about the same"
    return estimate


def check_dry_run(job: JobConfig, space: SearchSpaceConfig, *, resume: bool) -> tuple[str, list[str]]:
    """The pre-flight checks that read only: the Ray release, the scheduler against the job,
    storage (reachable, a free name, or for ``--resume`` the state to restore), the trial
    against this machine, a local model folder (and data.max_length against it), and the
    tracking names and URI. The tracking server is not probed (a local store would be
    created) and the data is not read (a hub dataset would be downloaded). Returns the sweep
    path and the warnings."""
    check_ray_version()
    build_scheduler(space, job)
    check_model_dir(job.model)
    if looks_like_local_path(job.model.name_or_path):  # a hub model would be downloaded
        from ftplat.data.tokenizer import build_tokenizer, check_max_length_fits

        check_max_length_fits(job.data, job.model, build_tokenizer(job.model))
    if job.tracking.enabled:
        check_tracking_settings(job.tracking)
    sweep_path = check_sweep_storage(job, build_sweep_name(job), resume=resume)
    return sweep_path, (build_ephemeral_path_warnings(job, os.getcwd())
                        + check_largest_trial_fits(job, space, check_trial_fits_this_machine)
                        + build_dtype_warnings(job.model))


def build_scheduler_text(job: JobConfig, space: SearchSpaceConfig) -> str:
    sched = space.scheduler
    if sched.type == "fifo":
        return "fifo (every trial runs to the end)"
    max_t = sched.max_t or build_max_evaluations(job)
    return (f"asha (grace_period {sched.grace_period}, reduction_factor {sched.reduction_factor:g}, "
            f"max_t {max_t} evaluations)")


def build_trial_resources_text(job: JobConfig) -> str:
    res = job.resources
    gpus = f", {res.gpus_per_worker:g} GPU each" if res.use_gpu else ", no GPU"
    driver = (f"{res.trial_driver_cpus:g} CPU for the trial driver" if res.trial_driver_cpus > 0
              else "no CPU for the trial driver, which reserves memory only")
    return (f"{res.num_workers} worker(s) x {res.cpus_per_worker:g} CPU{gpus}, plus {driver} "
            f"({res.cpus_per_trial:g} CPUs a trial); up to {res.max_concurrent_trials} trial(s) at once")


def build_largest_trial_lines(job: JobConfig, space: SearchSpaceConfig) -> list[str]:
    """The largest trial a searched ``resources`` field reaches, beside the job's own."""
    largest, searched = build_largest_trial_job(job, space)
    if not searched:
        return []
    return [f"the largest trial ({', '.join(searched)} at their largest) reserves: "
            f"{build_trial_resources_text(largest)}"]


def format_storage_text(estimate: dict) -> str:
    if "unknown" in estimate:
        return f"unknown: {estimate['unknown']}"
    at = f", with {estimate['at']}" if estimate.get("at") else ""
    lines = [f"{estimate['parameters']:,} parameters ({estimate['trainable_parameters']:,} trained{at}); one checkpoint "
             f"{format_bytes(estimate['checkpoint_bytes'])} without, "
             f"{format_bytes(estimate['checkpoint_bytes_with_optimizer'])} with the optimizer state",
             f"while running: {estimate['checkpoints_while_running']} checkpoints, "
             f"{format_bytes(estimate['sweep_bytes_while_running'])} "
             f"({format_bytes(estimate['sweep_bytes_without_optimizer'])} without the optimizer state)",
             f"after retention: {estimate['checkpoints_after_retention']} checkpoints, "
             f"{format_bytes(estimate['sweep_bytes_after_retention'])}"]
    if "note" in estimate:
        lines.append(estimate["note"])
    return "\n    ".join(lines)


def format_sweep_plan(job: JobConfig, space: SearchSpaceConfig, *, sweep_path: str, estimate: dict) -> str:
    """The plan ``--dry-run`` prints: the resolved configs as YAML, then the sweep's shape."""
    from ftplat.tracking.runs import redact_config, redact_text

    job_data = redact_config(job.model_dump(mode="json"))
    space_data = space.model_dump(mode="json")
    lines = ["# job config (resolved)", yaml.safe_dump(job_data, sort_keys=False).rstrip(), "",
             "# search space (resolved)", yaml.safe_dump(space_data, sort_keys=False).rstrip(), "",
             "# plan",
             f"trials: {space.num_samples} ({space.algorithm}, seed {space.seed}), objective "
             f"{space.objective.metric} ({space.objective.mode}), scope {space.scope}",
             f"scheduler: {build_scheduler_text(job, space)}",
             f"each trial reserves: {build_trial_resources_text(job)}",
             *build_largest_trial_lines(job, space),
             f"storage: {redact_text(sweep_path)} (not created by a dry run)",
             f"checkpoint storage: {format_storage_text(estimate)}",
             "not checked by a dry run: the data (read and tokenized when the sweep starts) and the MLflow server"]
    return "\n".join(lines)


def build_trained_tokens(job: JobConfig, space: SearchSpaceConfig) -> int | None:
    """Tokens the whole sweep trains on (padded length, an upper bound), None when the train
    split's size is unknown without reading the data."""
    d, t = job.data, job.training
    per_trial_rows = None
    if t.max_steps > 0:
        per_trial_rows = t.max_steps * t.per_device_train_batch_size * job.resources.num_workers
    else:
        rows = d.train_size or KNOWN_TRAIN_ROWS.get(d.source)
        if rows is not None:
            per_trial_rows = rows * t.num_train_epochs
    return None if per_trial_rows is None else math.ceil(per_trial_rows * d.max_length * space.num_samples)


def build_cpu_sweep_warning(job: JobConfig, space: SearchSpaceConfig, count: ParameterCount) -> str | None:
    """A warning for a sweep that trains on CPUs (``resources.use_gpu`` false) while its work,
    trained tokens x parameters, is GPU-sized; None when it is not, or cannot be told."""
    if job.resources.use_gpu:
        return None
    parameters = count.trainable or KNOWN_PARAMETERS.get(job.model.name_or_path)
    tokens = build_trained_tokens(job, space)
    if parameters is None or tokens is None or tokens * parameters < GPU_SIZED_WORK:
        return None
    recipe = CPU_RECIPES.get(job.task.type)
    fix = (f"use --config {recipe[0]} --search-space {recipe[1]}" if recipe else
           "shrink it (a smaller model.name_or_path, data.train_size, data.max_length, search.num_samples)")
    return (f"this sweep is GPU-sized ({space.num_samples} trials, about {tokens:,} trained tokens x "
            f"{parameters:,} trained parameters) but resources.use_gpu is false: on CPUs it would take many "
            f"hours; on a CPU machine {fix}, and see what a sweep would do first with --dry-run")


def read_cpu_sweep_warning(job: JobConfig, space: SearchSpaceConfig) -> str | None:
    """``build_cpu_sweep_warning`` with the parameter count read offline when it matters."""
    if job.resources.use_gpu:
        return None
    count = ParameterCount()
    if job.model.name_or_path not in KNOWN_PARAMETERS or job.model.peft is not None:
        count = read_parameter_count(job)
    return build_cpu_sweep_warning(job, space, count)
