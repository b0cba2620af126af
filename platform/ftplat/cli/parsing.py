"""The command-line parser every ``ftplat`` command uses (light: no ftplat imports)."""

from __future__ import annotations

import argparse

from ftplat.errors import EXIT_USAGE


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a bad command line is refused like any bad input: one ``error:`` line
    naming the argument, exit code 2 (argparse's own usage lines would come first). Its
    sub-commands' parsers are of this class too (argparse makes them of the parent's)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {message}; run '{self.prog} --help' for the options\n")
