"""``model.peft``: train a parameter-efficient adapter (the ``peft`` library) instead of the
whole model. Every field is searchable (``search.parameters.model.peft.r``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_serializer, model_validator

from ftplat.config.base import StrictModel

#: Fields that only LoRA and DoRA have (IA3 learns scaling vectors, no rank).
LORA_ONLY_FIELDS = ("r", "lora_alpha", "lora_dropout", "use_rslora")
#: The serialization context key that dumps every field of an ia3 adapter too.
ALL_FIELDS = "all_fields"


class PeftConfig(StrictModel):
    """An adapter on the frozen pretrained model; the task's head stays fully trainable."""

    method: Literal["lora", "dora", "ia3"] = "lora"
    """``lora`` (low-rank updates), ``dora`` (LoRA with a learned magnitude, peft's use_dora)
    or ``ia3`` (learned scaling vectors, fewest parameters)."""
    r: int = Field(default=8, ge=1)
    """LoRA/DoRA rank of the update matrices."""
    lora_alpha: float = Field(default=16, gt=0)
    """LoRA/DoRA scaling: the update is multiplied by lora_alpha / r (lora_alpha / sqrt(r) with
    use_rslora)."""
    use_rslora: bool = False
    """Rank-stabilized LoRA (peft's use_rslora): scale the update by lora_alpha / sqrt(r), so a
    search over r compares ranks at a learning rate that means the same for each; with
    lora_alpha / r, a fixed lora_alpha shrinks the update as r grows."""
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    """Dropout on the adapter's input (LoRA/DoRA)."""
    target_modules: list[str] | Literal["all-linear"] | None = None
    """Module names (or name suffixes) that get an adapter, or ``all-linear``. Default: peft's
    per-architecture choice (BERT: query, value; Llama: q_proj, v_proj), with ftplat's for
    architectures peft has none for (Longformer, DistilBERT)."""
    modules_to_save: list[str] | None = None
    """Modules trained whole and saved beside the adapter. Default: the task's head
    (``classifier``/``score``; peft's choice for the head classes it knows)."""

    @model_serializer(mode="wrap")
    def _applying_fields(self, handler, info):
        """A dump (a trial's config, sweep_config.json, MLflow's params) of an ia3 adapter
        leaves out the LoRA fields nobody wrote: IA3 has no rank, scaling or adapter dropout,
        and their defaults would read as written. Those written stay, for the LoRA trials of a
        searched method. ``context={ALL_FIELDS: True}`` dumps every field (the search space's
        paths are checked against it)."""
        data = handler(self)
        if self.method == "ia3" and not (info.context or {}).get(ALL_FIELDS):
            for name in LORA_ONLY_FIELDS:
                if name not in self.model_fields_set:
                    data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _method_fields(self):
        if isinstance(self.target_modules, list) and not self.target_modules:
            raise ValueError("target_modules is empty; name modules, use all-linear, or leave it out for the default")
        return self


def check_peft_method_fields(peft: PeftConfig | None, searched: set[str]) -> None:
    """Refuse LoRA-only fields that the user wrote, or searches, for a job whose method is
    ia3 and not searched. Checked on the user's config, not on each trial's: a trial of a
    searched method (lora or ia3) carries the job's LoRA fields, which its IA3 ignores.

    Args:
        peft: the job's ``model.peft`` as validated from the user's YAML and overrides (its
            ``model_fields_set`` are the fields written).
        searched: the dotted paths the search space varies.
    """
    if peft is None or peft.method != "ia3" or "model.peft.method" in searched:
        return
    given = [f"model.peft.{name}" for name in LORA_ONLY_FIELDS if name in peft.model_fields_set]
    given += [f"search.parameters.model.peft.{name}" for name in LORA_ONLY_FIELDS if f"model.peft.{name}" in searched]
    if given:
        raise ValueError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to model.peft.method lora and "
                         "dora, not ia3; remove "
                         f"{'it' if len(given) == 1 else 'them'}")
