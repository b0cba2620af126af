"""The error contract: what the user can fix versus what went wrong while running.

``UserError`` (and ``ConfigError``) carry a one-line message that names the field or argument
and the fix; the command-line tools print it and exit with code 2, no traceback. Any other
exception is a runtime failure: the tools log it with its traceback and exit with code 1.

``UserError`` is a ``ValueError`` so code that validates input keeps the project's rule
("``ValueError`` for user errors"); but a ``ValueError`` raised by a library (transformers,
pyarrow, Ray) is *not* a ``UserError`` and is reported as a failure, with its traceback.
"""

from __future__ import annotations


class FtplatError(Exception):
    """Base of the errors ftplat raises on purpose."""


class UserError(FtplatError, ValueError):
    """Bad input the user can fix: the message names the field (or argument) and the fix."""


class ConfigError(UserError):
    """A user error in a config file or a ``key=value`` override."""


class UnreadableSweepError(UserError):
    """A sweep folder holding a file that cannot be read (cut short by a copy still being
    written or a full disk, not what ftplat writes, or refused by storage); ``reason`` says
    which file and why."""

    def __init__(self, sweep_uri: str, reason: str):
        super().__init__(f"SWEEP {sweep_uri!r} cannot be read: {reason}")
        self.reason = reason


class SweepInterrupted(FtplatError):
    """The sweep stopped before its trials ended (Ctrl-C: Tune saves its state and returns);
    ``--resume`` continues it. Nothing that belongs to a finished sweep has been done."""


#: Exit codes of the command-line tools (130: interrupted, as a shell reports Ctrl-C).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
