"""What every config section shares: strict validation and how names and paths are read."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for every config section: unknown keys are errors, no str->number coercion."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_default=True, use_attribute_docstrings=True
    )


def normalize_eval_metric(name: str) -> str:
    """``accuracy`` or ``eval_accuracy`` as the key HF logs (``eval_accuracy``); whether the
    task produces it is checked against the job's task."""
    return name if name.startswith("eval_") else f"eval_{name}"


def looks_like_local_path(source: str) -> bool:
    """True when ``source`` is meant as a filesystem path rather than a hub id."""
    return source.startswith(("/", "./", "../", "~")) or os.path.exists(source)
