"""Reading YAML: config files (a key given twice is refused) and ``key=value`` overrides."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml

from ftplat.errors import ConfigError

#: A number as people write it, ``2e-5`` included (YAML 1.1 reads that as a string).
FLOAT_TEXT_RE = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that names a key twice: PyYAML would keep the last value and drop the rest."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (a second
    ``training:`` block would silently replace the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # ``<<: *base`` merges, and its keys may be set again on purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue  # an unhashable key: SafeLoader's own error names it
                if first is not key_node.start_mark:
                    raise DuplicateKeyError(
                        "while reading a mapping", node.start_mark,
                        f"duplicate key {key!r} (first at line {first.line + 1}); give each key once, "
                        "with what both set merged", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


class OverrideLoader(StrictLoader):
    """The command line's YAML: ``2e-5`` is a number everywhere, inside ``{...}`` and
    ``[...]`` too (YAML 1.1 wants ``2.0e-5``; nobody means the string there)."""


OverrideLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+.0123456789"))


def format_yaml_error(path: Path, exc: yaml.YAMLError, text: str) -> str:
    """``<path>: not valid YAML at line L, column C: <problem>``, with a hint for tabs (YAML
    indents with spaces only, and a tab is the usual cause of an error that looks like none)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    problem = " ".join(str(problem).split())
    if mark is None:
        return f"{path}: not valid YAML ({problem})"
    line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
    hint = ""
    if "\t" in line or "'\\t'" in problem:
        hint = "; YAML indents with spaces only: replace the tab on that line with spaces"
    return f"{path}: not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{hint}"


def read_yaml(path: str | Path, *, option: str = "--config") -> dict[str, Any]:
    """The mapping in the YAML file given with ``option`` (named in the errors)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option} {str(path)!r} is a directory; give the YAML file in it")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; check the path given to {option}")
    text = path.read_text()
    try:
        data = yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(format_yaml_error(path, exc, text)) from None
    if data is None:
        # An empty file is almost always a mistake (a failed copy, the wrong file); taking it
        # as "all defaults" would silently run the embedded IMDB recipe.
        raise ConfigError(f"{path}: {option} file is empty (or only comments); write the settings "
                          f"to change in it, or leave out {option} to use the embedded defaults")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def parse_override_value(text: str) -> Any:
    """Parse the right side of ``key=value``: YAML, with ``2e-5`` a number (on the command line
    nobody means the string); text that is not valid YAML stays text."""
    try:
        return yaml.load(text, Loader=OverrideLoader)
    except DuplicateKeyError as exc:
        raise ConfigError(f"{text!r}: {exc.problem}") from None
    except yaml.YAMLError:
        return text


def build_literal_override(key: str, value: str) -> str:
    """``key=value`` that sets ``value`` as the text it is: quoted when YAML would read it as
    something else (``2024-05-01`` a date, ``2024`` a number, ``yes`` a boolean)."""
    if parse_override_value(value) == value:
        return f"{key}={value}"
    # A JSON string is a YAML double-quoted scalar: every character kept as given.
    return f"{key}={json.dumps(value)}"


def split_override_key(data: dict[str, Any], key: str, dotted_sections: tuple[str, ...]) -> list[str]:
    """The path of ``key`` in ``data``. Under a section named in ``dotted_sections`` the rest is
    one name (the search space's ``parameters.training.learning_rate`` is the parameter
    ``training.learning_rate``), unless it starts with the name of an entry already there:
    ``parameters.training.learning_rate.low`` is that parameter's ``low``."""
    parts = key.strip().split(".")
    if len(parts) <= 2 or parts[0] not in dotted_sections:
        return parts
    section, rest = parts[0], parts[1:]
    entries = data.get(section) if isinstance(data.get(section), dict) else {}
    for n in range(len(rest) - 1, 0, -1):
        name = ".".join(rest[:n])
        if isinstance(entries.get(name), dict):
            return [section, name, *rest[n:]]
    if len(rest) > 2 and any(isinstance(e, dict) and rest[-1] in e for e in entries.values()):
        # ``.high`` of an entry that is not there (a job path has two parts at least, so
        # ``task.type`` stays one name): a new entry named "....high" is never meant.
        name = ".".join(rest[:-1])
        raise ConfigError(f"{section}.{name} is not in {section} (it has {', '.join(entries)}), so it has no "
                          f"{rest[-1]} to set; give the whole entry: {section}.{name}={{...}}")
    return [section, ".".join(rest)]


def apply_overrides(
    data: dict[str, Any], overrides: list[str], *, source: str = "override", dotted_sections: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Return a copy of ``data`` with ``a.b.c=value`` overrides applied (``dotted_sections``:
    :func:`split_override_key`). A section that is null (``model.peft: null``, as every
    recorded job has it without an adapter) takes a key as an empty one would."""
    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{source} {item!r}: expected key=value, e.g. training.learning_rate=3.0e-5")
        key, _, raw = item.partition("=")
        try:
            parts = split_override_key(data, key, dotted_sections)
        except ConfigError as exc:
            raise ConfigError(f"{source} {item!r}: {exc}") from None
        if not all(parts):
            raise ConfigError(f"{source} {item!r}: empty segment in key {key!r}")
        node = data
        for part in parts[:-1]:
            if node.get(part) is None:
                node[part] = {}
            child = node[part]
            if not isinstance(child, dict):
                raise ConfigError(f"{source} {item!r}: {part!r} is a value, not a section")
            node = child
        try:
            node[parts[-1]] = parse_override_value(raw)
        except ConfigError as exc:
            raise ConfigError(f"{source} {item!r}: {exc}") from None
    return data


def set_dotted(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``{"a.b": v}`` assignments applied (trial parameters)."""
    data = copy.deepcopy(data)
    for path, value in values.items():
        node = data
        *head, last = path.split(".")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = value
    return data


def build_trial_job(job: dict[str, Any], hyperparameters: dict[str, Any] | None) -> dict[str, Any]:
    """A trial's own job config (a dict): the sweep's job with the trial's searched values set.
    What the trial trained with is what its test score, its export and its registered model
    must use (a searched ``task.mlm_probability`` masks the test split as it masked training)."""
    return set_dotted(job, hyperparameters or {})
