"""``ftplat predict MODEL_DIR [TEXT ...] [--file F]``: an exported model's predictions, whatever its task.

The task comes from the model folder (``ftplat_task.json`` of an ftplat export, else its
``config.json``: ``ftplat.tasks.build_task_for_model_dir``), which builds the pipeline and
formats each prediction. A sentence pair is ``TEXT<TAB>TEXT_PAIR`` (an argument or a line), or a
JSON object ``{"text": ..., "text_pair": ...}`` per line of a ``.jsonl`` file. A model that
generates text (causal-lm) continues each input, as long as ``--max-new-tokens`` and as
random as ``--temperature`` say; other models refuse those options.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Iterable

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.errors import EXIT_USAGE, UserError
from ftplat.tasks.values import GENERATION_LEAST
from ftplat.tasks.values import build_generation_options as build_task_generation_options

#: A ``--file`` with this ending holds one JSON object per line instead of plain text lines.
JSONL_SUFFIX = ".jsonl"


def build_text_input(line: str, where: str) -> str | dict[str, str]:
    """A text, or ``{"text", "text_pair"}`` for ``TEXT<TAB>TEXT_PAIR``; UserError for more TABs."""
    text, tab, pair = line.partition("\t")
    if not tab:
        return line
    if "\t" in pair:
        raise UserError(f"{where} has more than one TAB; a sentence pair is TEXT<TAB>TEXT_PAIR")
    if not text.strip() or not pair.strip():
        raise UserError(f"{where} has an empty side of TEXT<TAB>TEXT_PAIR")
    return {"text": text.strip(), "text_pair": pair.strip()}


def build_jsonl_input(line: str, where: str) -> dict[str, str]:
    """The input of one ``.jsonl`` line: an object with ``text`` and an optional ``text_pair``
    (a dict either way: its text is never split at a TAB)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where} is not valid JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
        raise UserError(f'{where} is not a JSON object with a non-empty "text" string '
                        '(e.g. {"text": "...", "text_pair": "..."})')
    pair = obj.get("text_pair")
    if pair is None:
        return {"text": obj["text"]}
    if not isinstance(pair, str) or not pair.strip():
        raise UserError(f'{where}: "text_pair" is not a non-empty string')
    return {"text": obj["text"], "text_pair": pair}


def read_file_inputs(path: str) -> list[tuple[str, str | dict[str, str]]]:
    """The non-empty lines of ``path`` (``-``: stdin) as ``(where, input)``; UserError naming the line."""
    jsonl = path != "-" and path.lower().endswith(JSONL_SUFFIX)
    name = "stdin" if path == "-" else path
    try:
        if path == "-":
            return _parse_lines(sys.stdin, name, jsonl)
        with open(path, encoding="utf-8") as stream:
            return _parse_lines(stream, name, jsonl)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--file {name!r} cannot be read: {_one_line(exc)}") from None


def _parse_lines(lines: Iterable[str], name: str, jsonl: bool) -> list[tuple[str, str | dict[str, str]]]:
    """``(where, input)`` per non-empty line: a text line as it is (its TAB is read once the
    model says whether it takes pairs), a JSON line's text or pair."""
    inputs: list[tuple[str, str | dict[str, str]]] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"--file {name} line {number}"
        inputs.append((where, build_jsonl_input(line, where) if jsonl else line.strip(" ")))
    return inputs


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def build_output_line(item: str | dict[str, str], prediction: dict[str, Any], task: Any, as_json: bool) -> str:
    fields = {"text": item} if isinstance(item, str) else dict(item)
    if as_json:
        return json.dumps({**fields, **prediction}, ensure_ascii=False)
    return task.format_prediction_line(prediction) + "\t" + "\t".join(fields.values())


def build_generation_options(args: argparse.Namespace, task: Any) -> dict[str, Any]:
    """``run_predict``'s generation keywords from ``--max-new-tokens`` and ``--temperature``
    (the task's defaults for those not given); UserError naming the flag otherwise."""
    given = {name: getattr(args, name, None) for name in GENERATION_LEAST}
    return build_task_generation_options(task, given, spell=lambda name: "--" + name.replace("_", "-"))


def build_argument_input(text: str, number: int) -> tuple[str, str]:
    """``(where, text)`` of the ``number``-th TEXT argument. A blank one is refused: a blank
    line of a file only separates texts, but a blank argument is usually an unset shell variable."""
    if not text.strip():
        raise UserError(f"argument {number} ({text!r}) is blank: give a text to predict on, or leave it out "
                        "(only --file skips blank lines)")
    return f"argument {number}", text


def build_model_inputs(located: list[tuple[str, str | dict[str, str]]], task: Any) -> list[str | dict[str, str]]:
    """The inputs as the model reads them. A text line's TAB separates a sentence pair for a
    model that reads pairs; a model trained on single texts (its export says so) reads the line
    whole, TAB included. A JSON line's text is never split. A pair to a single-text model and a
    lone text to a pair model are refused, naming the input."""
    reads_pairs = task.accepts_text_pair and task.settings.text_pair is not False
    inputs = []
    for where, item in located:
        if isinstance(item, str):
            item = build_text_input(item, where) if reads_pairs else item
            if task.settings.text_pair and isinstance(item, str):
                raise UserError(f"{where} has no TAB, but the model was trained on sentence pairs: give "
                                "TEXT<TAB>TEXT_PAIR (or a .jsonl line with text and text_pair)")
        elif "text_pair" not in item:
            if task.settings.text_pair:
                raise UserError(f'{where} has no "text_pair", but the model was trained on sentence pairs')
            item = item["text"]
        elif not reads_pairs:
            why = f"a {task.name} model" if not task.accepts_text_pair else "trained on single texts"
            raise UserError(f"{where} is a sentence pair (a JSON line's text_pair) but the model takes one text per "
                            f"input ({why})")
        inputs.append(item)
    return inputs


def run_predict_cli(args: argparse.Namespace) -> int:
    located = [build_argument_input(text, i) for i, text in enumerate(args.texts, start=1)]
    if args.file:
        located += read_file_inputs(args.file)
    if not located:
        raise UserError("no texts: give them as arguments or with --file")
    if args.batch_size < 1:
        raise UserError(f"--batch-size is {args.batch_size}; give 1 or more")
    args.model_dir = os.path.expanduser(args.model_dir)  # a quoted ~ is not expanded by the shell
    if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
        raise UserError(f"MODEL_DIR {args.model_dir!r} holds no config.json: not a model directory")
    from ftplat.tasks import TASK_FILE, build_task_for_model_dir

    try:
        task = build_task_for_model_dir(args.model_dir)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"MODEL_DIR {args.model_dir!r}: its {TASK_FILE} or config.json does not name a task "
                        f"ftplat serves ({type(exc).__name__}: {_one_line(exc)})") from None
    generation = build_generation_options(args, task)
    inputs = build_model_inputs(located, task)
    try:
        pipe = task.build_pipeline(args.model_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"MODEL_DIR {args.model_dir!r} does not load as a {task.name} model: "
                        f"{_one_line(exc)}") from None
    predictions = task.run_predict(pipe, inputs, batch_size=args.batch_size, **generation)
    for item, prediction in zip(inputs, predictions):
        print(build_output_line(item, prediction, task, args.json))
    return 0


def main(argv: list[str] | None = None, *, prog: str = "ftplat predict") -> int:
    p = OneLineErrorParser(prog=prog, description="Predict with an exported model, whatever its task "
                           "(labels and scores, labels above a threshold, values, entities, the words for a "
                           "mask token, or generated text).")
    p.add_argument("model_dir", help="a model directory (ftplat export, or any HF model of an ftplat task)")
    p.add_argument("texts", nargs="*", help="texts to predict on (a blank one is refused); TEXT<TAB>TEXT_PAIR for a "
                   "sentence pair")
    p.add_argument("--file", help="also each non-empty line of this file ('-' for stdin; TEXT<TAB>TEXT_PAIR for a "
                   'pair); a .jsonl file holds one {"text": ..., "text_pair": ...} object per line')
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--json", action="store_true", help="print one JSON object per input instead of a table")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="causal-lm: tokens generated per input (default 64)")
    p.add_argument("--temperature", type=float, default=None,
                   help="causal-lm: 0 (the default) generates the likeliest tokens; above 0 samples at that "
                   "temperature")
    args = p.parse_intermixed_args(argv)  # options may come between the texts
    try:
        return run_predict_cli(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
