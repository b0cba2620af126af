"""Config errors as the user reads them: one line per problem naming the YAML path, what was
given and the fix, blaming the ``key=value`` override that set the field rather than the file."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from ftplat.config.hf_args import build_training_key_hint
from ftplat.config.search_space import (AshaSchedulerConfig, ChoiceParam, FifoSchedulerConfig, IntParam,
                                         LogUniformParam, UniformParam)
from ftplat.config.training_config import TrainingConfig
from ftplat.config.yaml_input import FLOAT_TEXT_RE
from ftplat.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: Prefix that sends a command-line override to the search space instead of the job config.
SEARCH_PREFIX = "search."


def _describe_input(value: Any) -> str:
    if isinstance(value, str) and FLOAT_TEXT_RE.match(value.strip()):
        return f"got the string {value!r}: write it as a YAML number such as 1.0e-5 (with a dot)"
    text = repr(value)
    return f"got {text if len(text) <= 60 else text[:57] + '...'}"


def _quote_hint(value: Any) -> str:
    """What to write when YAML read a text field's value as a date, number or boolean."""
    shown = str(value) if isinstance(value, (dt.date, int, float)) and not isinstance(value, bool) else "..."
    return (f"YAML reads that as {type(value).__name__}: quote the value to keep it text ('{shown}' in a file, "
            f"\"'{shown}'\" after the = of an override)")


#: A dotted field name in a message (``resources.use_gpu``).
DOTTED_NAME_RE = re.compile(r"\b[a-z_]+(?:\.[a-z_0-9]+)+\b")


def build_error_path(err: dict[str, Any]) -> str:
    """The YAML path of one pydantic error (empty for a rule across sections)."""
    loc = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
    # Discriminated unions put the tag name in the path; it is not a YAML key.
    return ".".join(p for p in loc if p not in {"loguniform", "uniform", "int", "choice", "fifo", "asha"})


def select_blamed_overrides(paths: list[str], overrides: list[str], shown_prefix: str = "", *,
                            whole: tuple[str, ...] = (), message: str = "") -> list[str]:
    """The ``key=value`` overrides that set the fields at ``paths``, as the user wrote them
    (``shown_prefix``: ``search.``). A path of a field (``training.hf_args``), or one in
    ``whole`` (an unknown key: nothing in the file is at fault), blames an override inside it.
    One of a whole section (``data``: a rule across its fields) blames an override that sets a
    field of the section the ``message`` names (``data.eval_split``), else none: the file's
    fields may be at fault."""
    blamed = []
    for path in paths:
        for override in overrides:
            key = override.partition("=")[0].strip()
            inside = ("." in path or path in whole) and key.startswith(path + ".")
            # Only an override of one of the section's own fields (data.eval_split), not of a
            # field inside one (model.peft.r for a rule about peft against trainable_patterns).
            named = ("." not in path and key.startswith(path + ".") and key.count(".") == 1
                     and re.search(rf"\b{re.escape(key.split('.')[1])}\b", message) is not None)
            if path and (path == key or path.startswith(key + ".") or inside or named):
                blamed.append(shown_prefix + override.strip())
    return list(dict.fromkeys(blamed))


def build_blamed_source(exc: ValidationError, overrides: list[str], source: str, shown_prefix: str = "") -> str:
    """What an error message names as its input: the overrides that set the fields it is about
    (a file that holds a valid value is not to blame), else ``source``."""
    blamed = []
    for err in exc.errors():
        path = build_error_path(err)
        # A rule across sections names its fields in the message (training.fp16 ... resources.use_gpu)
        paths = [path] if path else DOTTED_NAME_RE.findall(err["msg"])
        whole = (path,) if err["type"] == "extra_forbidden" else ()
        blamed += select_blamed_overrides(paths, overrides, shown_prefix, whole=whole, message=err["msg"])
    blamed = list(dict.fromkeys(blamed))
    return f"override {', '.join(blamed)}" if blamed else source


def build_message_source(message: str, overrides: list[str], source: str, shown_prefix: str = "") -> str:
    """``build_blamed_source`` for a check that runs after the schema's: its message begins with
    the path it is about (``search space parameters.<path>:``, ``model.peft.r applies ...``)."""
    path = message.removeprefix("search space ").split(":", 1)[0].split(" ", 1)[0].removeprefix(SEARCH_PREFIX)
    blamed = select_blamed_overrides([path], overrides, shown_prefix)[:1]
    return f"override {blamed[0]}" if blamed else source


def build_unknown_key_message(path: str) -> str:
    """What an unknown key's error says: where a TrainingArguments name lives for
    ``training.<name>``, else to check the spelling."""
    section, _, name = path.partition(".")
    if section == "training" and name and "." not in name:
        hint = build_training_key_hint(name, own_fields=set(TrainingConfig.model_fields))
        if hint:
            return f"unknown key; {hint}"
    return "unknown key (check the spelling; see the config reference in README.md)"


#: The ``type``-tagged sections: a search parameter, or the scheduler, with their classes.
TYPE_TAGGED = {"scheduler": (FifoSchedulerConfig, AshaSchedulerConfig),
               "parameters": (LogUniformParam, UniformParam, IntParam, ChoiceParam)}


def build_missing_type_message(loc: str, given: Any) -> str:
    """What a parameter or scheduler without its ``type`` key is told (pydantic says only that
    it could not find the tag): the key, its values, and the keys given that it does not know."""
    classes = TYPE_TAGGED["scheduler" if loc.split(".")[0] == "scheduler" else "parameters"]
    tags = [get_args(c.model_fields["type"].annotation)[0] for c in classes]
    known = {name for c in classes for name in c.model_fields}
    unknown = sorted(k for k in given if k not in known) if isinstance(given, dict) else []
    also = f"; unknown key(s) {', '.join(map(repr, unknown))}" if unknown else ""
    return f"needs a type key, one of {', '.join(tags)} (type: {tags[0]}){also}"


def format_validation_error(exc: ValidationError, *, prefix: str = "") -> str:
    """One line per problem: ``<yaml.path>: <what is wrong>; <what was given>``."""
    lines = []
    for err in exc.errors():
        loc = build_error_path(err)
        path = ".".join([prefix, loc] if prefix and loc else [prefix or loc])
        kind = err["type"]
        msg = err["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            msg = build_unknown_key_message(path)
        elif kind == "union_tag_not_found":
            msg = build_missing_type_message(loc, err.get("input"))
        elif kind in {"float_type", "int_type", "bool_type", "string_type", "literal_error"} or kind.endswith("_parsing"):
            msg = f"{msg}; {_describe_input(err.get('input'))}"
            if kind == "string_type" and isinstance(err.get("input"), (dt.date, int, float)):
                msg = f"{msg}; {_quote_hint(err['input'])}"
        # A rule across sections (JobConfig's own validators) names its fields in the message.
        lines.append(f"{path}: {msg}" if path else msg)
    return "; ".join(lines)


def validate(model: type[M], data: Any, *, source: str, prefix: str = "", overrides: list[str] = (),
             shown_prefix: str = "") -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{build_blamed_source(exc, list(overrides), source, shown_prefix)}: "
                          f"{format_validation_error(exc, prefix=prefix)}") from None
