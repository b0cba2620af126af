"""``ftplat reproduce SWEEP [--trial ID]``: run one recorded trial again and say whether it
scored the same."""

from __future__ import annotations

import logging
import sys

from ftplat.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UserError

logger = logging.getLogger(__name__)


def build_parser(prog: str):
    from ftplat.cli.parsing import OneLineErrorParser

    p = OneLineErrorParser(
        prog=prog,
        description="Run one trial of a finished sweep again (its config, searched values and seed, as "
                    "recorded) as a one-trial sweep beside it, and compare its objective at every "
                    "evaluation with the original's. Exit 0 when they match, 1 when not.")
    # Optional to argparse only: with the optional overrides after it, argparse's message for
    # a missing SWEEP named key=value as required too.
    p.add_argument("sweep", metavar="SWEEP", nargs="?", help="a sweep name under --storage, or a sweep folder path or URI")
    p.add_argument("--trial", metavar="ID", help="the trial to run again (default: the winner)")
    p.add_argument("--storage", help="where a bare SWEEP name is looked up (default: the job config's default)")
    p.add_argument("--name", help="the new sweep's name (default: <sweep>-reproduce-<trial>)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="largest difference of the objective that still counts as the same (default: 1e-4)")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config fields to change for the run, e.g. tracking.enabled=false (the comparison "
                        "then tests what they change)")
    return p


def main(argv: list[str] | None = None, *, prog: str = "ftplat reproduce") -> int:
    from ftplat.cli.sweep import configure_logging, format_failure, format_sweep_failures
    from ftplat.cli.sweeps import build_default_storage, build_sweep_uri

    parser = build_parser(prog)
    args = parser.parse_intermixed_args(argv)
    if args.sweep is None:
        parser.error("the following arguments are required: SWEEP")
    configure_logging()
    try:
        from ftplat.tune.reproduce import (DEFAULT_TOLERANCE, build_reproduce_configs, compare_trials,
                                           format_comparison, format_version_changes, read_recorded_sweep,
                                           select_trial)
        from ftplat.versions import collect_versions

        tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
        if tolerance < 0:
            raise UserError(f"--tolerance {tolerance}: must be >= 0")
        uri = build_sweep_uri(args.sweep, args.storage or build_default_storage())
        config_json, original = read_recorded_sweep(uri)
        trial = select_trial(original, args.trial)
        new_name = args.name or f"{original.sweep_name}-reproduce-{trial.trial_id}"
        job, space = build_reproduce_configs(config_json, trial, sweep_name=new_name, overrides=args.overrides)
        changed = format_version_changes(original.versions, collect_versions())
        if changed:
            logger.warning("Library versions differ from the original sweep's: %s", ", ".join(changed))
        from ftplat.tune.plan import check_dry_run
        from ftplat.tune.sweep import run_sweep

        check_dry_run(job, space, resume=False)
        logger.info("Reproducing trial %s of %s (%s) as sweep %s", trial.trial_id, original.sweep_name,
                    ", ".join(f"{k}={v}" for k, v in trial.hyperparameters.items()), new_name)
        summary = run_sweep(job, space)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - one line, the traceback in a log, exit 1
        print(f"error: {format_failure(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    for line in format_sweep_failures(summary):
        print(f"error: {line}", file=sys.stderr)
    if not summary.trials:
        return EXIT_FAILURE
    comparison = compare_trials(trial, summary.trials[0], original.objective.metric, tolerance)
    lines = format_comparison(comparison, trial_id=trial.trial_id, sweep_name=original.sweep_name, new_sweep=new_name)
    from ftplat.tune.preflight import build_data_changes

    changed_data = build_data_changes((original.data or {}).get("fingerprints"), (summary.data or {}).get("fingerprints"))
    if changed_data:
        # The source changed under its name (a file rewritten, a hub dataset updated).
        lines.append(f"  the tokenized data differ from the original's: {', '.join(changed_data)}")
    print("\n".join(lines), flush=True)
    return EXIT_OK if comparison.matched else EXIT_FAILURE
