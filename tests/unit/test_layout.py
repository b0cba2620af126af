"""The repository layout rules that keep `platform` from shadowing the standard library."""

import importlib.util
import platform
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_platform_is_a_source_root_not_a_package():
    assert not (REPO / "platform" / "__init__.py").exists()
    assert callable(platform.system) and platform.system()


def test_ftplat_is_imported_from_the_source_root():
    spec = importlib.util.find_spec("ftplat")
    assert Path(spec.origin).resolve() == REPO / "platform" / "ftplat" / "__init__.py"


def test_no_module_shadows_stdlib_or_dependencies():
    forbidden = {"platform", "test", "ray", "mlflow", "optuna", "deepspeed", "torch", "transformers",
                 "datasets", "yaml", "utils", "logging", "json", "types", "typing", "copy"}
    names = {p.stem for p in (REPO / "platform" / "ftplat").rglob("*.py")}
    names |= {p.name for p in (REPO / "platform" / "ftplat").rglob("*") if p.is_dir()}
    assert not names & forbidden


def test_required_top_level_layout():
    for name in ("platform", "jobs", "search_spaces", "cluster", "tests", "pyproject.toml"):
        assert (REPO / name).exists(), name


def test_job_scripts_are_thin():
    for script in (REPO / "jobs").glob("*.py"):
        assert len(script.read_text().splitlines()) <= 30, script


def test_test_module_names_are_unique_across_test_folders():
    # The test folders are not packages: pytest imports each file as a top-level module by its
    # basename, so two files of one name make collection fail for the whole suite.
    seen = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a module name"
        seen[path.name] = path


def test_benchmark_scripts_do_not_shadow_libraries():
    # A script's folder comes first on sys.path: benchmarks/peft.py would be imported as `peft`.
    forbidden = {"peft", "ray", "mlflow", "optuna", "deepspeed", "torch", "transformers", "datasets",
                 "platform", "yaml", "accelerate", "evaluate", "sklearn", "seqeval"}
    assert not {p.stem for p in (REPO / "benchmarks").glob("*.py")} & forbidden
