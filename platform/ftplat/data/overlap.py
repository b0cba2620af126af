"""Rows the selection or test split shares with train: the same inputs (texts, pairs, words)
in both. A score on them measures what the model memorised, not how it generalises; IMDB's
own splits share 123 reviews. Counted once the subsets are drawn, from hashes of each row's
inputs (exact match after trimming whitespace), so memory stays a set of integers."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

#: From this share of a split's rows the overlap is a warning; below it, an info line.
WARN_SHARE = 0.01


def build_row_keys(inputs: dict[str, list[Any]]) -> list[int]:
    """One hash per row of its inputs, in a fixed order of the input roles."""
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, (list, tuple)):
            return tuple(norm(v) for v in value)
        return value

    roles = sorted(inputs)
    return [hash(tuple(norm(inputs[r][i]) for r in roles)) for i in range(len(inputs[roles[0]]))] if roles else []


def run_overlap_checks(train: dict[str, list[Any]], others: dict[str, tuple[dict[str, list[Any]], str]]) -> dict[str, int]:
    """How many rows of each other role (``{role: (inputs, split)}``) have inputs a train row
    has; logged for each role that has any."""
    seen = set(build_row_keys(train))
    counts = {}
    for role, (inputs, split) in others.items():
        keys = build_row_keys(inputs)
        shared = sum(1 for k in keys if k in seen)
        if not shared:
            continue
        counts[role] = shared
        level = logging.WARNING if shared >= WARN_SHARE * len(keys) else logging.INFO
        logger.log(level, "%d of the %d %s rows (split %r) have the inputs of a train row: their score measures what "
                   "the model memorised, not how it generalises", shared, len(keys), role, split)
    return counts
