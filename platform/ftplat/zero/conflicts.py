"""How a DeepSpeed config disagrees with a trial's training settings, in words that name both
sides: the comparisons Hugging Face makes inside the worker (``HfTrainerDeepSpeedConfig``, an
explicit value that differs from ``TrainingArguments``), the scheduler and optimizer a preset
must match, and what the hardware cannot run (offload without a GPU, float16 on CPU). Pure:
``ftplat.zero.config`` runs them on the driver for every trial the search can draw."""

from __future__ import annotations

from typing import Any

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
