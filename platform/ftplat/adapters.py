"""``model.peft``: wrapping a trial's model in a peft adapter, and reading one back.

peft keeps the pretrained weights frozen and trains the adapter plus the task's head
(``modules_to_save``); the Trainer then saves only those into each checkpoint, so a checkpoint
is megabytes where the whole model is gigabytes. Export merges the adapter into the base model
(or copies it alone) with the same functions the workers use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from typing import Any

from ftplat.errors import UserError

logger = logging.getLogger(__name__)

#: Files peft writes for an adapter (``PeftModel.save_pretrained``).
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")

#: Adapter targets of architectures peft has no default for (its defaults cover BERT,
#: RoBERTa, Llama, Mistral, GPT-2 and most others); the attention query and value
#: projections, as peft chooses for BERT.
EXTRA_LORA_TARGETS = {"longformer": ["query", "value"], "distilbert": ["q_lin", "v_lin"]}
EXTRA_IA3_TARGETS = {"longformer": (["key", "value", "output.dense"], ["output.dense"]),
                     "distilbert": (["k_lin", "v_lin", "lin2"], ["lin2"])}


def build_target_modules(peft_cfg: Any, model_type: str, linear_names: list[str]) -> tuple[Any, Any]:
    """The modules that get an adapter (and IA3's feed-forward ones) for ``model_type``:
    the config's, else peft's per-architecture default, else ftplat's; UserError when none."""
    from peft.utils.constants import (TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING,
                                      TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING,
                                      TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)

    if peft_cfg.method == "ia3":
        if peft_cfg.target_modules is not None:
            # Without named feed-forward modules IA3 scales every target's output.
            return peft_cfg.target_modules, []
        if model_type in TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING:
            return (TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING[model_type],
                    TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING[model_type])
        if model_type in EXTRA_IA3_TARGETS:
            return EXTRA_IA3_TARGETS[model_type]
    else:
        if peft_cfg.target_modules is not None:
            return peft_cfg.target_modules, None
        if model_type in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
            return TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING[model_type], None
        if model_type in EXTRA_LORA_TARGETS:
            return EXTRA_LORA_TARGETS[model_type], None
    shown = ", ".join(sorted(linear_names)[:12])
    raise UserError(f"model.peft.target_modules: neither peft nor ftplat has a default for model type "
                    f"{model_type!r}; name the modules (e.g. its attention projections) or use all-linear. "
                    f"Linear layers of this model end in: {shown}")


def build_new_weight_modules(new_weights: Any, modules_to_save: list[str] | None) -> list[str]:
    """The modules holding weights the pretrained checkpoint lacked, beyond ``modules_to_save``.

    peft freezes every module it neither adapts nor saves, and a checkpoint holds only what it
    saves. A module initialised at random when the base was loaded (DeBERTa's pooler under a
    classification head, a masked-LM head missing from an encoder-only checkpoint) would then
    stay random through training and be drawn again, differently, wherever the base is loaded
    (export, test scoring, serving): the exported model would not be the trained one. Saving
    it trains it too, as full fine-tuning does."""
    named = list(modules_to_save or [])
    found: list[str] = []
    for name in new_weights:
        parts = name.split(".")[:-1]
        # peft saves a module whose name ends with a listed one, and with it everything inside.
        enclosing = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if parts and not any(m.endswith(n) for m in enclosing for n in [*named, *found]):
            found.append(".".join(parts))
    return found


def build_peft_config(peft_cfg: Any, *, task_type: str | None, model: Any, new_weights: Any = ()) -> Any:
    """The peft config (``LoraConfig`` / ``IA3Config``) of ``model.peft`` for ``model``;
    ``new_weights``: the model's parameters its checkpoint lacked (``build_new_weight_modules``)."""
    import peft
    import torch

    linear = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
    targets, feedforward = build_target_modules(peft_cfg, model.config.model_type, linear)
    # peft adds the head itself for classification task types (``classifier``, ``score``).
    head = {"SEQ_CLS": ["classifier", "score"], "TOKEN_CLS": ["classifier", "score"]}.get(task_type, [])
    extra = build_new_weight_modules(new_weights, [*(peft_cfg.modules_to_save or []), *head])
    # peft saves a copy of each such module; a copy of one holding a tied weight (a language
    # model head's decoder is the input embeddings) would untie it.
    tied = build_tied_parameter_names(model)
    kept = [m for m in extra if any(t == m or t.startswith(m + ".") for t in tied)]
    if kept:
        logger.warning("peft: %s initialised at random (not in the pretrained checkpoint) but shares weights with "
                       "another module, so it stays frozen; name it in model.peft.modules_to_save to train it, or "
                       "start from a checkpoint that has it", ", ".join(kept))
    extra = [m for m in extra if m not in kept]
    if extra:
        logger.info("peft: training and saving %s with the adapter (initialised at random: the pretrained "
                    "checkpoint does not hold them)", ", ".join(extra))
    modules_to_save = [*(peft_cfg.modules_to_save or []), *extra] or None
    common = {"task_type": task_type, "target_modules": targets, "modules_to_save": modules_to_save}
    if peft_cfg.method == "ia3":
        return peft.IA3Config(feedforward_modules=feedforward, **common)
    return peft.LoraConfig(r=peft_cfg.r, lora_alpha=peft_cfg.lora_alpha, lora_dropout=peft_cfg.lora_dropout,
                           use_rslora=peft_cfg.use_rslora, use_dora=peft_cfg.method == "dora", **common)


def build_tied_parameter_names(model: Any) -> set[str]:
    """Names of the parameters ``model`` holds under more than one name (tied weights)."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return {n for group in names.values() if len(group) > 1 for n in group}


@contextlib.contextmanager
def quiet_peft_model_warnings():
    """peft (0.21) reads ``model.is_gradient_checkpointing`` as it wraps a model, which
    transformers 5 deprecates with a FutureWarning in every worker's log; the attribute's
    value is all peft needs, and nothing the user can change."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def run_wrap_peft(model: Any, peft_cfg: Any, *, task_type: str | None, new_weights: Any = ()) -> Any:
    """``model`` as a ``PeftModel`` whose adapter, head and randomly initialised modules
    (``new_weights``, see ``build_new_weight_modules``) train, the rest frozen."""
    import peft

    config = build_peft_config(peft_cfg, task_type=task_type, model=model, new_weights=new_weights)
    try:
        with quiet_peft_model_warnings():
            wrapped = peft.get_peft_model(model, config)
    except ValueError as exc:
        # peft names the target modules it could not find; the fix is the config's.
        raise UserError(f"model.peft: {exc}") from None
    run_float32_trainable_modules(wrapped)
    trainable, total = count_parameters(wrapped)
    logger.info("peft %s: %d trainable parameters of %d (%.2f%%)", peft_cfg.method, trainable, total,
                100 * trainable / total)
    return wrapped


def run_float32_trainable_modules(model: Any) -> None:
    """Train in float32 what trains whole beside the adapter on a half-precision base
    (``model.dtype: bfloat16``): peft casts the adapter's own weights to float32, but the copies
    of ``modules_to_save`` (the task's head) keep the base's dtype, where AdamW rounds most small
    updates away. Each module holding such a weight gets it in float32, its floating inputs
    cast to its weights' dtype and its output back to the base's, so the modules around it run
    as before."""
    import torch

    def cast_inputs(module: Any, args: tuple) -> tuple:
        # The weights' dtype at call time: DeepSpeed's bf16 engine casts the whole model down.
        dtype = next(module.parameters(recurse=False)).dtype
        return tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)

    for module in model.modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad and p.dtype in (torch.bfloat16,
                                                                                                torch.float16)]
        if not own:
            continue
        base_dtype = own[0].dtype
        for param in own:
            param.data = param.data.float()

        def cast_output(module: Any, args: tuple, output: Any, dtype: Any = base_dtype) -> Any:
            return output.to(dtype) if torch.is_tensor(output) and output.is_floating_point() else output

        module.register_forward_pre_hook(cast_inputs)
        module.register_forward_hook(cast_output)


def count_parameters(model: Any) -> tuple[int, int]:
    """Trainable and total parameter counts (ZeRO-3 keeps true sizes in ``ds_numel``)."""
    trainable = total = 0
    for param in model.parameters():
        n = getattr(param, "ds_numel", param.numel())
        total += n
        trainable += n if param.requires_grad else 0
    return trainable, total


def is_adapter_dir(names: list[str] | set[str]) -> bool:
    """Whether a checkpoint's file names are a peft adapter's (not whole model weights)."""
    names = set(names)
    return ADAPTER_CONFIG in names and any(w in names for w in ADAPTER_WEIGHTS)


def build_merged_model(base_model: Any, adapter_dir: str) -> Any:
    """``base_model`` (with the task's head) with the adapter of ``adapter_dir`` merged into
    its weights: a plain transformers model that ``from_pretrained`` loads alone."""
    import peft

    with quiet_peft_model_warnings():
        merged = peft.PeftModel.from_pretrained(base_model, adapter_dir).merge_and_unload()
    run_untie_shared_parameters(merged)
    return merged


def run_untie_shared_parameters(model: Any) -> None:
    """Give each parameter ``model`` holds under several names a copy per name, unless its
    config ties word embeddings (``from_pretrained`` then ties them again). ``save_pretrained``
    writes a shared tensor under one name, and loading an untied config re-initialises the
    others: a merged masked-LM whose trained decoder peft had untied lost its trained bias,
    which it still shared with ``predictions.bias`` in memory."""
    import torch

    text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(text_config, "tie_word_embeddings", False):
        return
    seen: set[int] = set()
    for module_name, module in model.named_modules(remove_duplicate=False):
        for name, param in list(module.named_parameters(recurse=False)):
            if id(param) in seen:
                setattr(module, name, torch.nn.Parameter(param.detach().clone(), requires_grad=param.requires_grad))
            seen.add(id(param))


def read_adapter_base(model_dir: str) -> str:
    """The base model an adapter folder was trained on (``base_model_name_or_path``)."""
    with open(os.path.join(model_dir, ADAPTER_CONFIG)) as f:
        return json.load(f).get("base_model_name_or_path") or ""


def build_adapter_serving_model(model_dir: str, auto_model: str) -> Any:
    """The model of an adapter-only export, ready to serve: its base model (from the hub or
    the path the adapter names) with the head its ``config.json`` describes, and the adapter
    and trained head of the folder merged in."""
    import transformers

    base_path = read_adapter_base(model_dir)
    if not base_path or (os.path.isabs(base_path) and not os.path.isdir(base_path)):
        raise UserError(f"{model_dir} is an adapter whose base model {base_path!r} is not on this machine; "
                        "copy the base model to that path, or export the sweep without --adapter-only "
                        "(a merged model needs no base)")
    config = transformers.AutoConfig.from_pretrained(model_dir)
    auto = getattr(transformers, auto_model)
    # The head's weights come from the adapter's modules_to_save; the base's own head (if any)
    # may have another shape, as in training.
    base = auto.from_pretrained(base_path, config=config, ignore_mismatched_sizes=True)
    return build_merged_model(base, model_dir).eval()
