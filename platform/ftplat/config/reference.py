"""The config reference in README.md, generated from the schema so the two cannot drift."""

from __future__ import annotations

import typing

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import AshaSchedulerConfig, ObjectiveConfig, SearchSpaceConfig

BEGIN = "<!-- BEGIN GENERATED CONFIG REFERENCE (python -m ftplat.config.reference --write README.md) -->"
END = "<!-- END GENERATED CONFIG REFERENCE -->"


def _sections(annotation) -> list[type[BaseModel]]:
    """The config sections a field may hold: one, or a tagged union of several (its None aside)."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]


def _tag(section: type[BaseModel]) -> str:
    """``{type: asha, ...}``: how a section of a tagged union is written."""
    tag = typing.get_args(section.model_fields["type"].annotation)[0]
    return f"`{{type: {tag}{', ...' if len(section.model_fields) > 1 else ''}}}`"


def _type_name(annotation) -> str:
    if annotation is type(None):
        return "None"
    if typing.get_origin(annotation) is dict and _sections(typing.get_args(annotation)[1]):
        return "dict[str, parameter]"  # the kinds are listed below the table
    if typing.get_origin(annotation) in (list, dict):
        return str(annotation).replace("typing.", "").replace("|", "\\|")
    text = str(annotation).replace("typing.", "").replace("NoneType", "None")
    text = text.replace("ftplat.config.search_space.", "").replace("ftplat.config.schema.", "")
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(repr(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is typing.Union and any(typing.get_origin(a) is typing.Literal
                                                             for a in typing.get_args(annotation)):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", text).replace("|", "\\|")


def _default(field) -> str:
    if field.default_factory is not None:
        return "see below"
    if field.default is PydanticUndefined:
        return "required"
    if isinstance(field.default, BaseModel):
        return "section"
    return f"`{field.default!r}`"


def _rows(model: type[BaseModel], prefix: str, defaults: dict[str, str] | None = None) -> list[str]:
    """One row per key; ``defaults``: how to show defaults that another setting decides."""
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if prefix:  # a nested section: its own keys (data.validation.split)
                rows += _rows(annotation, f"{prefix}{name}.")
            continue
        doc = " ".join((field.description or "").split())
        default = (defaults or {}).get(name) or _default(field)
        sections = _sections(annotation)
        if len(sections) > 1:  # a tagged union (scheduler): its sections' keys follow the table's rows
            kinds = " or ".join(_tag(s) for s in sections)
            shown = _tag(type(field.default)) if isinstance(field.default, BaseModel) else default
            rows.append(f"| `{prefix}{name}` | {kinds} | {shown} | {doc} |")
            continue
        if sections and type(None) in typing.get_args(annotation):
            # a section that is off unless given (model.peft): the row, then its keys
            rows.append(f"| `{prefix}{name}` | section or None | {default} | {doc} |")
            rows += _rows(sections[0], f"{prefix}{name}.")
            continue
        rows.append(f"| `{prefix}{name}` | {_type_name(annotation)} | {default} | {doc} |")
    return rows


def build_reference_markdown() -> str:
    lines = [BEGIN, "", "### Job config (`--config`, overrides `section.key=value`)", "",
             "| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in JobConfig.model_fields.items():
        lines += _rows(field.annotation, f"{name}.")
    lines += ["", "### Search space (`--search-space`, overrides `search.key=value`)", "",
              "| key | type | default | meaning |", "|---|---|---|---|"]
    lines += _rows(SearchSpaceConfig, "")
    lines += _rows(ObjectiveConfig, "objective.", defaults={"metric": "the job's metric_for_best_model",
                                                            "mode": "the metric's direction"})
    lines += _rows(AshaSchedulerConfig, "scheduler.")
    lines += ["", "Parameter kinds: `{type: loguniform, low, high}`, `{type: uniform, low, high}`, "
              "`{type: int, low, high, log}` (high inclusive), `{type: choice, values: [...]}`.", "", END]
    return "\n".join(lines)


def run_update_readme(path: str) -> None:
    """Replace the generated block of ``path`` with the current reference."""
    with open(path) as f:
        text = f.read()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    with open(path, "w") as f:
        f.write(text[:start] + build_reference_markdown() + text[end:])


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write"]:
        run_update_readme(sys.argv[2])
    else:
        print(build_reference_markdown())
