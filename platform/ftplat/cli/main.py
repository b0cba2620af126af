"""The ``ftplat`` console script."""

from __future__ import annotations

import sys

COMMANDS = {
    "sweep": ("ftplat.cli.sweep", "run a hyperparameter sweep"),
    "checkpoints": ("ftplat.cli.checkpoints", "checkpoints gc SWEEP [--dry-run]: apply the retention policy"),
    "sweeps": ("ftplat.cli.sweeps", "sweeps list [STORAGE] | show SWEEP [--json]: how far sweeps are, from storage"),
    "reproduce": ("ftplat.cli.reproduce", "reproduce SWEEP [--trial ID]: run a recorded trial again, compare scores"),
    "export": ("ftplat.cli.export", "export SWEEP OUT_DIR: the winner as a Hugging Face model directory"),
    "predict": ("ftplat.cli.predict", "predict MODEL_DIR TEXT... [--file F]: predictions of any task"),
    "ds-estimate": ("ftplat.cli.ds_estimate", "ds-estimate --model M --num-gpus N: DeepSpeed ZeRO memory needs"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:
        from ftplat import __version__

        print(f"ftplat {__version__}")
        return 0
    if argv and argv[0] not in COMMANDS and argv[0] not in {"-h", "--help"}:
        import difflib

        close = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        meant = f"did you mean {close[0]!r}? " if close else ""
        print(f"error: {argv[0]!r} is not an ftplat command; {meant}commands: {', '.join(COMMANDS)} "
              "(ftplat --help says what each does)", file=sys.stderr)
        return 2
    if not argv or argv[0] in {"-h", "--help"}:
        lines = ["usage: ftplat [--version] COMMAND [args]", "", "commands:"]
        lines += [f"  {name:<12} {help_}" for name, (_, help_) in COMMANDS.items()]
        print("\n".join(lines), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    import importlib

    module = importlib.import_module(COMMANDS[argv[0]][0])
    return module.main(argv[1:], prog=f"ftplat {argv[0]}")


if __name__ == "__main__":
    sys.exit(main())
