"""``ftplat sweep`` / ``jobs/imdb_sweep.py``: parse arguments, load configs, run the sweep."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.config.loading import build_literal_override, load_sweep_configs
from ftplat.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, SweepInterrupted, UserError

if TYPE_CHECKING:
    from ftplat.config.schema import JobConfig
    from ftplat.config.search_space import SearchSpaceConfig
    from ftplat.records import SweepSummary

logger = logging.getLogger(__name__)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

EPILOG = """\
overrides: key=value pairs into the job config (training.learning_rate=3.0e-5,
data.train_size=800); prefix search. for the search space (search.num_samples=4,
search.scope=last-5-avg). Without --config / --search-space the embedded defaults are used:
the IMDB recipe (bert-base-uncased, stanfordnlp/imdb, len 160, batch 16, 3 epochs) and a
search over learning rate, warmup and weight decay.
"""


def build_parser(prog: str = "ftplat sweep") -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog=prog,
        description="Run a hyperparameter sweep: Ray Tune + Optuna over Ray Train trials of the HF Trainer.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="job config YAML (default: the embedded IMDB recipe)")
    p.add_argument("--search-space", help="search space YAML (default: lr, warmup, weight decay)")
    p.add_argument("--model", help="shorthand for model.name_or_path=...")
    p.add_argument("--dataset", help="shorthand for data.source=...")
    p.add_argument("--storage", help="shorthand for storage.storage_path=...")
    p.add_argument("--name", help="shorthand for storage.sweep_name=...")
    p.add_argument("--resume", action="store_true", help="continue the sweep named by --name")
    p.add_argument("--dry-run", action="store_true",
                   help="check the configs, a local model folder, the MLflow names, storage and this machine, "
                        "print the plan (configs, trials, "
                        "resources, storage estimate) and exit; starts no Ray and writes nothing")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="set a config field (see below); before, between or after the options")
    return p


def parse_sweep_args(argv: list[str] | None, prog: str = "ftplat sweep") -> argparse.Namespace:
    """Options and ``key=value`` overrides in any order (``--storage S data.max_length=32 --name N``)."""
    return build_parser(prog).parse_intermixed_args(argv)


def build_overrides(args: argparse.Namespace) -> list[str]:
    shorthands = {"model": "model.name_or_path", "dataset": "data.source",
                  "storage": "storage.storage_path", "name": "storage.sweep_name"}
    # Each shorthand sets a text field: its value is the text given, never YAML's reading of
    # it (--name 2024-05-01 is a name, not a date). Explicit key=value overrides come last so
    # they win over the shorthands.
    return [build_literal_override(key, getattr(args, attr)) for attr, key in shorthands.items()
            if getattr(args, attr)] + list(args.overrides)


class ProgressHandler(logging.StreamHandler):
    """Records below WARNING to the ``sys.stdout`` of the moment (tests swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)
        self.addFilter(lambda record: record.levelno < logging.WARNING)
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def configure_logging() -> None:
    """ftplat's progress (INFO) goes to stdout; warnings and errors, of every library, to
    stderr. A refused sweep's stderr then holds its one ``error:`` line and nothing else."""
    root = logging.getLogger()
    if not root.handlers:  # a host application (or pytest) keeps its own handlers
        errors = logging.StreamHandler()
        errors.setLevel(logging.WARNING)
        errors.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(errors)
        root.setLevel(logging.WARNING)
    package = logging.getLogger("ftplat")
    package.setLevel(logging.INFO)
    if not any(isinstance(h, ProgressHandler) for h in package.handlers):
        package.addHandler(ProgressHandler())
    # huggingface_hub warns of each retry of an unreachable hub (twice: its handler and this
    # one), some 40 lines before the refusal that names the cause; the driver only reads the
    # hub before the sweep starts.
    logging.getLogger("huggingface_hub.utils._http").setLevel(logging.ERROR)
    # datasets draws a progress bar on stderr for every file it converts; a user's setting wins.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def run_write_failure_log(exc: BaseException) -> str:
    """Write ``exc`` with its traceback (credentials in URIs masked) to a new file under
    ``<tempdir>/ftplat-logs/``; return its path."""
    from ftplat.tracking.runs import redact_text

    folder = Path(tempfile.gettempdir()) / "ftplat-logs"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = folder / f"sweep-{stamp}-{os.getpid()}.log"
    # "x": never write through a file (or a link) someone else put there in a shared tempdir.
    with path.open("x") as out:
        out.write(redact_text("".join(traceback.format_exception(exc))))
    return str(path)


def format_failure(exc: BaseException) -> str:
    """The one stderr line of a runtime failure: what failed, and where its traceback is."""
    from ftplat.tracking.runs import format_error

    try:
        where = f"traceback in {run_write_failure_log(exc)}"
    except OSError as log_exc:  # the error itself matters more than its log
        logger.exception("The sweep failed, and its log could not be written (%s)", log_exc)
        where = "traceback above"
    return f"the sweep failed: {format_error(exc)}; {where}"


def main(argv: list[str] | None = None, *, prog: str = "ftplat sweep") -> int:
    """Exit 0 with a winner; 2 on bad input (one ``error:`` line naming the field and the fix,
    nothing written, Ray not started); 1 on any other failure (one ``error:`` line naming the
    log file that holds the traceback), or when no trial produced a score, the final retention
    pass failed or MLflow tracking failed (one ``error:`` line each); 130 when interrupted
    (Ctrl-C: the line says how to ``--resume``). ``--dry-run``: exit 0
    after the read-only checks, with the plan on stdout."""
    args = parse_sweep_args(argv, prog)
    configure_logging()
    try:
        job, space = load_sweep_configs(args.config, args.search_space, build_overrides(args))
        if args.resume and not job.storage.sweep_name:
            raise UserError("--resume needs the sweep's name: pass --name NAME")
        # Heavy imports (torch, Ray, transformers) only once the configs are known good.
        if args.dry_run:
            print(build_dry_run_text(job, space, resume=args.resume))
            return EXIT_OK
        from ftplat.tune.plan import check_dry_run, read_cpu_sweep_warning
        from ftplat.tune.sweep import run_sweep

        # The read-only checks first, so a sweep refused by them prints its one error line only.
        check_dry_run(job, space, resume=args.resume)
        # A resumed sweep runs its stored configs (the ones given may be the embedded defaults,
        # GPU-sized), and was warned when it started.
        warning = None if args.resume else read_cpu_sweep_warning(job, space)
        if warning:
            logger.warning(warning)
        summary = run_sweep(job, space, resume=args.resume)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SweepInterrupted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # before the sweep wrote anything (its checks, tokenizing, Ray's start)
        print("error: interrupted (Ctrl-C) before the sweep started; nothing was written to storage: run it again",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: one line, the traceback in a log, exit 1
        print(f"error: {format_failure(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    failures = format_sweep_failures(summary)
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_FAILURE if failures else EXIT_OK


def build_dry_run_text(job: JobConfig, space: SearchSpaceConfig, *, resume: bool) -> str:
    """The read-only checks, then the plan; warnings (the CPU one included) are logged."""
    from ftplat.tune.plan import (build_cpu_sweep_warning, build_storage_estimate, check_dry_run,
                                  format_sweep_plan, read_largest_parameter_count)

    sweep_path, warnings = check_dry_run(job, space, resume=resume)
    count = read_largest_parameter_count(job, space)
    cpu_warning = build_cpu_sweep_warning(job, space, count)
    for line in warnings + ([cpu_warning] if cpu_warning else []):
        logger.warning(line)
    return format_sweep_plan(job, space, sweep_path=sweep_path, estimate=build_storage_estimate(job, space, count))


def format_sweep_failures(summary: SweepSummary) -> list[str]:
    """Why a sweep that ran to its end still failed, one line each; empty when it did not.

    The summary is written in every one of these cases."""
    from ftplat.tracking.runs import redact_text

    lines = []
    if summary.winner is None:
        failed = [t for t in summary.trials if t.status == "ERROR"]
        line = f"no trial produced a score ({summary.objective.metric}, scope {summary.scope})"
        if failed:
            first = next((t.error for t in failed if t.error), "unknown")
            line += f": {len(failed)} of {len(summary.trials)} failed (first error: {redact_text(first[:200])})"
        lines.append(line)
    if summary.retention_error:
        lines.append(f"checkpoint retention failed: {summary.retention_error}; "
                     f"`ftplat checkpoints gc {redact_text(summary.sweep_path)}` applies it again")
    if (summary.test or {}).get("error"):
        lines.append(f"scoring the winner on the test split failed: {summary.test['error']}")
    if summary.tracking_error:
        lines.append(f"MLflow tracking failed: {summary.tracking_error}; summary.json and the checkpoints "
                     "are complete, the MLflow runs are not")
    return lines
