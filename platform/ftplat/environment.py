"""Process environment variables set for one block only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str], *, keep_set: bool = False) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block and put every key back as it was after
    (removed when it was unset). With ``keep_set`` a variable already set keeps its value."""
    saved = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if not (keep_set and key in os.environ):
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
