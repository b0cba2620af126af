"""``ftplat sweep`` / ``jobs/imdb_sweep.py``: parse arguments, load configs, run the sweep."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from ftplat.config.loading import load_sweep_configs
from ftplat.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UserError

if TYPE_CHECKING:
    from ftplat.records import SweepSummary

logger = logging.getLogger(__name__)

EPILOG = """\
overrides: key=value pairs into the job config (training.learning_rate=3.0e-5,
data.train_size=800); prefix search. for the search space (search.num_samples=4,
search.scope=last-5-avg). Without --config / --search-space the embedded defaults are used:
the IMDB recipe (bert-base-uncased, stanfordnlp/imdb, len 160, batch 16, 3 epochs) and a
search over learning rate, warmup and weight decay.
"""


def build_parser(prog: str = "ftplat sweep") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
    p.add_argument("overrides", nargs="*", metavar="key=value")
    return p


def build_overrides(args: argparse.Namespace) -> list[str]:
    shorthands = {"model": "model.name_or_path", "dataset": "data.source",
                  "storage": "storage.storage_path", "name": "storage.sweep_name"}
    # Explicit key=value overrides come last so they win over the shorthands.
    return [f"{key}={getattr(args, attr)}" for attr, key in shorthands.items()
            if getattr(args, attr)] + list(args.overrides)


def configure_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("ftplat").setLevel(logging.INFO)


def main(argv: list[str] | None = None, *, prog: str = "ftplat sweep") -> int:
    """Exit 0 with a winner, 2 on a user error (one line, no traceback), 1 on any other
    failure (logged with its traceback), or when no trial produced a score, the final
    retention pass failed or MLflow tracking failed (one ``error:`` line each)."""
    args = build_parser(prog).parse_args(argv)
    configure_logging()
    try:
        job, space = load_sweep_configs(args.config, args.search_space, build_overrides(args))
        if args.resume and not job.storage.sweep_name:
            raise UserError("--resume needs the sweep's name: pass --name NAME")
        # Heavy imports (torch, Ray, transformers) only once the configs are known good.
        from ftplat.tune.sweep import run_sweep

        summary = run_sweep(job, space, resume=args.resume)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception:  # noqa: BLE001 - the CLI's contract: a traceback in the log, exit 1
        logger.exception("The sweep failed")
        return EXIT_FAILURE
    failures = format_sweep_failures(summary)
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_FAILURE if failures else EXIT_OK


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
    if summary.tracking_error:
        lines.append(f"MLflow tracking failed: {summary.tracking_error}; summary.json and the checkpoints "
                     "are complete, the MLflow runs are not")
    return lines
