"""DeepSpeed is an optional extra: a job that names it without it installed is refused before
any cluster work, naming the field and the install command; nothing else needs it."""

from __future__ import annotations

import ast
import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

from ftplat.cli import ds_estimate
from ftplat.cli.sweep import main as sweep_main
from ftplat.config.loading import load_sweep_configs
from ftplat.errors import UserError

REPO = Path(__file__).resolve().parents[2]
INSTALL = "pip install 'ftplat[deepspeed]'"


@pytest.fixture
def without_deepspeed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "deepspeed" else real(name, *a, **k))


def test_a_preset_without_deepspeed_is_refused_naming_the_field_and_the_extra(without_deepspeed):
    with pytest.raises(UserError) as info:
        load_sweep_configs(None, None, ["training.deepspeed=zero2"])
    assert "training.deepspeed 'zero2' needs DeepSpeed, which is not installed" in str(info.value)
    assert INSTALL in str(info.value)


def test_a_json_config_without_deepspeed_is_refused(without_deepspeed, tmp_path):
    path = tmp_path / "ds.json"
    path.write_text("{}")
    with pytest.raises(UserError, match=r"training\.deepspeed '.*ds\.json' needs DeepSpeed"):
        load_sweep_configs(None, None, [f"training.deepspeed={path}"])


def test_a_searched_preset_without_deepspeed_is_refused(without_deepspeed):
    with pytest.raises(UserError, match="training.deepspeed 'zero3' needs DeepSpeed"):
        load_sweep_configs(None, None, ["search.parameters.training.deepspeed={type: choice, values: [zero3]}"])


def test_a_deepspeed_module_blocked_in_sys_modules_counts_as_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    with pytest.raises(UserError, match="needs DeepSpeed"):
        load_sweep_configs(None, None, ["training.deepspeed=zero2"])


def test_a_job_without_deepspeed_does_not_need_it(without_deepspeed):
    job, _ = load_sweep_configs(None, None, [])
    assert job.training.deepspeed is None


def test_the_sweep_command_refuses_it_in_one_line_writing_nothing(without_deepspeed, tmp_path, capsys):
    rc = sweep_main(["--storage", str(tmp_path / "s"), "training.deepspeed=zero2"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("error: ") and "training.deepspeed 'zero2'" in err[0] and INSTALL in err[0]
    assert not (tmp_path / "s").exists()


def test_ds_estimate_names_the_extra(without_deepspeed, capsys):
    rc = ds_estimate.main(["--model", "bert-base-uncased", "--num-gpus", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ftplat ds-estimate needs DeepSpeed") and INSTALL in err


def test_deepspeed_is_an_extra_that_dev_includes():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    name = lambda req: req.split(">")[0].split("=")[0].split("[")[0].strip()  # noqa: E731
    assert "deepspeed" not in {name(r) for r in project["dependencies"]}
    assert "deepspeed" in {name(r) for r in project["optional-dependencies"]["deepspeed"]}
    assert "deepspeed" in {name(r) for r in project["optional-dependencies"]["dev"]}


def _module_level_imports(node: ast.AST):
    """Import nodes run when the module is imported: outside every function body."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _module_level_imports(child)


def test_no_module_imports_deepspeed_when_it_is_imported():
    """Every ``import deepspeed`` is inside the function that needs it."""
    top_level = []
    for path in sorted((REPO / "platform" / "ftplat").rglob("*.py")):
        for node in _module_level_imports(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "deepspeed" or n.startswith("deepspeed.") for n in names):
                top_level.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert top_level == []


SAVE_WITHOUT_DEEPSPEED = """
import sys, tempfile
import torch
from transformers import BertConfig, BertForSequenceClassification
{patch}
model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=16))
from accelerate.utils import extract_model_from_parallel
assert extract_model_from_parallel(model) is model
print("deepspeed" in sys.modules)
"""


@pytest.mark.parametrize("patched", [True, False])
def test_a_trial_without_deepspeed_does_not_import_it_to_unwrap_its_model(patched):
    """Every checkpoint save unwraps the model through accelerate, which imports DeepSpeed
    (about a second in a fresh worker) only to rule out a ``DeepSpeedEngine``; the worker of a
    trial without DeepSpeed skips that import. Unpatched, the import happens (the check works)."""
    import subprocess

    patch = ("from ftplat.zero.runtime import run_skip_unused_deepspeed_import; "
             "run_skip_unused_deepspeed_import(); run_skip_unused_deepspeed_import()") if patched else ""
    out = subprocess.run([sys.executable, "-c", SAVE_WITHOUT_DEEPSPEED.format(patch=patch)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == str(not patched)


def test_accelerate_still_asks_for_deepspeed_where_the_worker_answers():
    import inspect

    from accelerate.utils import other

    assert callable(other.is_deepspeed_available)
    assert "is_deepspeed_available()" in inspect.getsource(other.extract_model_from_parallel)
