"""DeepSpeed ZeRO configs: the shipped presets, the user's own JSON, and the checks that
explain a conflict with the training settings before any cluster work.

Hugging Face fills every ``"auto"`` value of a DeepSpeed config from ``TrainingArguments``
(``HfTrainerDeepSpeedConfig``) and raises on an explicit value that differs, but only inside
the worker, after the cluster started and the data was tokenized. The same comparisons run
here on the driver, against the job config and the search space, so a sweep whose trials
would all fail never starts. Nothing here imports torch or DeepSpeed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
from importlib import resources
from typing import Any

from ftplat.errors import UserError

PRESETS = ("zero2", "zero3", "zero3_offload")

#: DeepSpeed Adam keys HF fills from TrainingArguments fields that only ``training.hf_args``
#: sets, with HF's defaults for those fields.
ADAM_FIELDS = {"optimizer.params.betas": ("adam_beta1", "adam_beta2"), "optimizer.params.eps": ("adam_epsilon",)}
ADAM_DEFAULTS = {"adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8}

#: DeepSpeed scheduler type -> the ``training.lr_scheduler_type`` with the same shape.
SCHEDULER_EQUIVALENTS = {"WarmupDecayLR": "linear", "WarmupLR": "constant_with_warmup", "WarmupCosineLR": "cosine"}

#: Job fields whose value HF copies into a DeepSpeed key marked "auto".
AUTO_FIELDS = {
    "train_micro_batch_size_per_gpu": "training.per_device_train_batch_size",
    "gradient_accumulation_steps": "training.gradient_accumulation_steps",
    "gradient_clipping": "training.max_grad_norm",
    "optimizer.params.lr": "training.learning_rate",
    "optimizer.params.weight_decay": "training.weight_decay",
    "scheduler.params.warmup_max_lr": "training.learning_rate",
    "scheduler.params.warmup_num_steps": "training.warmup_steps",
    "scheduler.params.total_num_steps": "training.max_steps",
    "fp16.enabled": "training.fp16",
    "bf16.enabled": "training.bf16",
}
#: train_batch_size is a product of three fields; any of them being searched needs "auto".
TRAIN_BATCH_FIELDS = ("resources.num_workers", "training.per_device_train_batch_size",
                      "training.gradient_accumulation_steps")
#: Job fields whose trial value decides how a preset is fitted (its scheduler and optimizer) or
#: whether a config may run at all (offload, mixed precision), not only whether a key must be
#: "auto". None of them is numeric, so only a choice can search them: every combination of the
#: choices is fitted and checked before the sweep.
TRIAL_FIELDS = ("training.deepspeed", "training.lr_scheduler_type", "training.optim", "resources.use_gpu",
                "training.fp16", "training.bf16")


#: How to get DeepSpeed, which is an optional extra of ftplat.
DEEPSPEED_INSTALL = "pip install 'ftplat[deepspeed]'"


def check_deepspeed_installed(what: str, *, otherwise: str = "") -> None:
    """Refuse ``what`` (the field or command that needs DeepSpeed) when DeepSpeed is not
    installed, naming the install command (and ``otherwise``, the other fix); found without
    importing it (seconds, and CUDA probes)."""
    try:
        found = importlib.util.find_spec("deepspeed") is not None
    except (ImportError, ValueError):  # a module entry of None, or a broken install
        found = False
    if not found:
        raise UserError(f"{what} needs DeepSpeed, which is not installed; run {DEEPSPEED_INSTALL}"
                        + (f", or {otherwise}" if otherwise else ""))


def is_preset(spec: str) -> bool:
    return spec in PRESETS


def load_preset(name: str) -> dict[str, Any]:
    """A shipped preset (package data, so a non-editable install has it)."""
    text = resources.files("ftplat.zero").joinpath("presets", f"{name}.json").read_text()
    return json.loads(text)


def load_deepspeed_json(path: str, *, field: str = "training.deepspeed") -> dict[str, Any]:
    """Read a user's DeepSpeed JSON; every problem is a one-line ``UserError`` naming the path."""
    if not os.path.isfile(path):
        raise UserError(f"{field}: DeepSpeed config {path!r} does not exist; give a JSON file or one of the "
                         f"presets {', '.join(PRESETS)}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise UserError(f"{field}: {path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{field}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not isinstance(data, dict):
        raise UserError(f"{field}: {path} must hold a JSON object at the top level, got {type(data).__name__}")
    return data


def build_fitted_preset(preset: dict[str, Any], job) -> dict[str, Any]:
    """A preset (as shipped) fitted to the job: its DeepSpeed scheduler (linear warmup and
    decay) and optimizer (AdamW) give way to the Trainer's own when the job asks for another
    schedule or optimizer, so every ``training.lr_scheduler_type`` and ``training.optim`` works.
    Offload keeps DeepSpeed's optimizer: ZeRO-Offload steps on the CPU with DeepSpeedCPUAdam."""
    dropped = set()
    if "scheduler" in preset and job.training.lr_scheduler_type != SCHEDULER_EQUIVALENTS[preset["scheduler"]["type"]]:
        dropped.add("scheduler")
    if job.training.optim != "adamw_torch" and get_dotted(preset, "zero_optimization.offload_optimizer") is None:
        dropped.add("optimizer")
    return {key: value for key, value in preset.items() if key not in dropped}


def load_deepspeed_spec(spec: str, job) -> dict[str, Any]:
    return build_fitted_preset(load_preset(spec), job) if is_preset(spec) else load_deepspeed_json(spec)


def get_dotted(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _job_value(job, dotted: str) -> Any:
    section, name = dotted.split(".")
    return getattr(getattr(job, section), name)


def _same(ds_value: Any, hf_value: Any) -> bool:
    if isinstance(ds_value, bool) or isinstance(hf_value, bool):
        return ds_value is hf_value or ds_value == hf_value
    if isinstance(ds_value, (int, float)) and isinstance(hf_value, (int, float)):
        return float(ds_value) == float(hf_value)
    return ds_value == hf_value


def _explicit(config: dict[str, Any], key: str) -> bool:
    """A key set to a real value; absent or "auto" means HF fills it, so it cannot conflict."""
    value = get_dotted(config, key)
    return value is not None and value != "auto"


def _check_warmup_num_steps(key: str, value: Any, field: str, t) -> list[str]:
    """HF fills max(1, warmup steps); a fraction above 0 depends on the data size, so only
    "auto" can match it."""
    steps = int(t.warmup_steps) if t.warmup_steps >= 1 else (1 if t.warmup_steps == 0 else None)
    if steps != value:
        return [f"{key}={value!r} must be \"auto\" or equal {field} as a whole step count "
                f"(got {field}={t.warmup_steps:g}); \"auto\" converts a warmup fraction to steps"]
    return []


def _check_total_num_steps(key: str, value: Any, field: str, t) -> list[str]:
    """Without max_steps the total follows from the data size, which only "auto" can track."""
    if t.max_steps <= 0 or t.max_steps != value:
        return [f'{key}={value!r} must be "auto" (the step count follows from the data) or equal '
                f"{field} (got {t.max_steps})"]
    return []


def _check_auto_fields(config: dict[str, Any], job, searched: set[str]) -> list[str]:
    """HF raises in the worker on an explicit value that differs from its job field; a
    searched field must be "auto" or the sampled values never reach DeepSpeed."""
    problems = []
    for key, field in AUTO_FIELDS.items():
        if not _explicit(config, key):
            continue
        value = get_dotted(config, key)
        if field in searched:
            problems.append(f"the search space varies {field} but the DeepSpeed config fixes {key}={value!r}; "
                            f'set {key} to "auto" so each trial\'s value reaches DeepSpeed')
        elif key == "scheduler.params.warmup_num_steps":
            problems += _check_warmup_num_steps(key, value, field, job.training)
        elif key == "scheduler.params.total_num_steps":
            problems += _check_total_num_steps(key, value, field, job.training)
        elif not _same(value, _job_value(job, field)):
            problems.append(f"{key}={value!r} differs from {field}={_job_value(job, field)!r}; set {key} to \"auto\" "
                            f"or make the two equal")
    return problems


def _check_train_batch_size(config: dict[str, Any], job, searched: set[str]) -> list[str]:
    """train_batch_size is a product of three job fields, so it has no single AUTO_FIELDS entry."""
    if not _explicit(config, "train_batch_size"):
        return []
    t = job.training
    value = get_dotted(config, "train_batch_size")
    varied = [f for f in TRAIN_BATCH_FIELDS if f in searched]
    product = job.resources.num_workers * t.per_device_train_batch_size * t.gradient_accumulation_steps
    if varied:
        return [f"the search space varies {varied[0]} but the DeepSpeed config fixes "
                f'train_batch_size={value!r}; set it to "auto"']
    if not _same(value, product):
        return [f"train_batch_size={value!r} differs from resources.num_workers x "
                f"training.per_device_train_batch_size x training.gradient_accumulation_steps = {product}; "
                'set it to "auto"']
    return []


def _check_adam_constants(config: dict[str, Any], job, searched: set[str]) -> list[str]:
    """HF fills betas and eps from adam_beta1/adam_beta2/adam_epsilon, which only
    ``training.hf_args`` sets (else HF's defaults), and raises in the worker on an explicit
    value that differs."""
    problems = []
    for key, names in ADAM_FIELDS.items():
        if not _explicit(config, key):
            continue
        value = get_dotted(config, key)
        fields = [f"training.hf_args.{name}" for name in names]
        varied = [field for field in fields if field in searched]
        if varied:
            problems.append(f"the search space varies {varied[0]} but the DeepSpeed config fixes {key}={value!r}; "
                            f'set {key} to "auto" so each trial\'s value reaches DeepSpeed')
            continue
        hf_values = [job.training.hf_args.get(name, ADAM_DEFAULTS[name]) for name in names]
        if not _same(value, hf_values if len(names) > 1 else hf_values[0]):
            given = ", ".join(f"{field}={v!r}" for field, v in zip(fields, hf_values))
            problems.append(f'{key}={value!r} differs from {given} (HF\'s default unless set in hf_args); set {key} '
                            'to "auto" or make them equal')
    return problems


def _check_optimizer_section(config: dict[str, Any], job) -> list[str]:
    """A DeepSpeed optimizer wins over training.optim, which would be silently ignored."""
    t = job.training
    if "optimizer" in config and t.optim != "adamw_torch":
        return [f"training.optim={t.optim!r} would be ignored: the DeepSpeed config defines its own "
                "optimizer; remove its optimizer section or leave training.optim at 'adamw_torch'"]
    return []


def _check_scheduler_type(config: dict[str, Any], job) -> list[str]:
    """A DeepSpeed scheduler wins over training.lr_scheduler_type; only a same-shape one is allowed."""
    scheduler = get_dotted(config, "scheduler.type")
    if scheduler is None:
        return []
    t = job.training
    same_shape = SCHEDULER_EQUIVALENTS.get(scheduler)
    if same_shape is None:
        return [f"scheduler.type={scheduler!r} is not one ftplat can match to training.lr_scheduler_type; "
                f"use one of {', '.join(SCHEDULER_EQUIVALENTS)} or remove the scheduler section"]
    if same_shape != t.lr_scheduler_type:
        return [f"scheduler.type={scheduler!r} (the shape of {same_shape!r}) differs from "
                f"training.lr_scheduler_type={t.lr_scheduler_type!r}; remove the DeepSpeed scheduler "
                f"section to use the Trainer's schedule, or set lr_scheduler_type to {same_shape!r}"]
    return []


def _check_zero_stage(config: dict[str, Any]) -> list[str]:
    """DeepSpeed rejects an unknown stage only inside the worker."""
    stage = get_dotted(config, "zero_optimization.stage")
    if stage is not None and (isinstance(stage, bool) or stage not in (0, 1, 2, 3)):
        return [f"zero_optimization.stage={stage!r} must be 0, 1, 2 or 3"]
    return []


def build_conflicts(config: dict[str, Any], job, searched: set[str] = frozenset()) -> list[str]:
    """Every disagreement between a DeepSpeed config and the job (and the search space).

    ``searched`` holds the dotted job paths the sweep varies: a DeepSpeed key fed by one of
    them must be "auto", or the trials' sampled values would never reach DeepSpeed.
    """
    return (_check_auto_fields(config, job, searched)
            + _check_train_batch_size(config, job, searched)
            + _check_adam_constants(config, job, searched)
            + _check_optimizer_section(config, job)
            + _check_scheduler_type(config, job)
            + _check_zero_stage(config))


def build_hardware_conflicts(config: dict[str, Any], job) -> list[str]:
    """Settings that need GPU workers, refused on a CPU-only job instead of failing in a worker."""
    if job.resources.use_gpu:
        return []
    problems = []
    for part in ("offload_optimizer", "offload_param"):
        device = get_dotted(config, f"zero_optimization.{part}.device")
        if device == "nvme":
            problems.append(f"zero_optimization.{part}.device='nvme' needs GPU workers (resources.use_gpu=true) "
                            "and an NVMe path; it is not supported on CPU workers")
        elif device == "cpu":
            problems.append(f"zero_optimization.{part}.device='cpu' offloads GPU memory to CPU RAM, but the workers "
                            "already train on CPU (resources.use_gpu=false); use zero3, or set resources.use_gpu=true")
    for key, field in (("fp16.enabled", "training.fp16"), ("bf16.enabled", "training.bf16")):
        if get_dotted(config, key) is True or _job_value(job, field):
            problems.append(f"{key} / {field}: DeepSpeed mixed precision needs GPU workers (resources.use_gpu=true); "
                            "CPU workers train in float32")
    return problems


def build_deepspeed_config(job, searched: set[str] = frozenset(),
                           drawn: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The DeepSpeed config of a job (``None`` without one), checked against the job and the
    searched parameters. Raises one ``UserError`` listing every problem; ``drawn`` (the
    search-space values that made this job from the sweep's) is named in it."""
    spec = job.training.deepspeed
    if spec is None:
        return None
    check_deepspeed_installed(f"training.deepspeed {spec!r}",
                              otherwise="remove training.deepspeed to train without it")
    config = load_deepspeed_spec(spec, job)
    problems = build_conflicts(config, job, set(searched)) + build_hardware_conflicts(config, job)
    if problems:
        where = f"preset {spec!r}" if is_preset(spec) else spec
        if drawn:
            where += ", in trials where the search space draws " + ", ".join(f"{k}={v!r}" for k, v in drawn.items())
        raise UserError(f"training.deepspeed ({where}): " + "; ".join(problems))
    return config


def build_sweep_deepspeed_configs(job, parameters: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The DeepSpeed config of every spec a sweep's trials can use, by spec, each checked for
    every combination of the searched TRIAL_FIELDS values (``parameters`` is the search space's
    ``{dotted path: parameter}``). A preset is given as shipped and each trial fits it to its own
    values (``build_trial_deepspeed_config``); the driver reads a JSON once and hands trials the
    dict, so the file need not exist on the worker nodes.
    """
    searched = set(parameters)
    choices = {path: list(parameters[path].values) for path in TRIAL_FIELDS
               if path in parameters and getattr(parameters[path], "values", None)}
    configs: dict[str, dict[str, Any]] = {}
    for combination in itertools.product(*choices.values()):
        drawn = dict(zip(choices, combination))
        trial_job = build_job_with(job, drawn)
        spec = trial_job.training.deepspeed
        config = build_deepspeed_config(trial_job, searched, drawn)
        if spec is not None:
            configs.setdefault(spec, load_preset(spec) if is_preset(spec) else config)
    return configs


def build_trial_deepspeed_config(configs: dict[str, dict[str, Any]], job) -> dict[str, Any] | None:
    """One trial's DeepSpeed config from the sweep's (``build_sweep_deepspeed_configs``): a
    preset fitted to the trial's own schedule and optimizer, a JSON as the driver read it."""
    spec = job.training.deepspeed
    config = configs.get(spec)
    return build_fitted_preset(config, job) if config is not None and is_preset(spec) else config


def build_job_with(job, values: dict[str, Any]):
    """``job`` with ``{section.field: value}`` applied (TRIAL_FIELDS are all two-part paths)."""
    sections: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        section, name = path.split(".")
        sections.setdefault(section, {})[name] = value
    return job.model_copy(update={s: getattr(job, s).model_copy(update=u) for s, u in sections.items()})
