"""Versions of the libraries a result depends on, recorded with every sweep."""

from __future__ import annotations

import importlib.metadata
import platform as _stdlib_platform

PACKAGES = ("ftplat", "ray", "torch", "transformers", "datasets", "optuna", "mlflow", "deepspeed", "accelerate")


def collect_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": _stdlib_platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out
