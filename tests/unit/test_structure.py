"""The package's structure, checked from its source: layers, import cycles, one place for each
storage name, and Ray internals reached from one module only (docs/architecture.md explains)."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import typing
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "platform" / "ftplat"

#: Lowest first. A module may import from its own layer and the layers below, never above.
#: The worker logs to MLflow (``tracking.callback``) and MLflow registers exported checkpoints,
#: so checkpoints and tracking sit below train; ``zero`` spans layers by module.
LAYERS = [
    ("foundation", ["ftplat", "ftplat.errors", "ftplat.environment", "ftplat.storage", "ftplat.layout", "ftplat.versions",
                    "ftplat.ray_internals", "ftplat.adapters"]),
    # What varies by workload; the config schema validates a job against its task.
    ("tasks", ["ftplat.tasks"]),
    ("config", ["ftplat.config", "ftplat.zero.config", "ftplat.zero.conflicts"]),
    ("scoring", ["ftplat.scoring", "ftplat.records"]),
    ("data", ["ftplat.data"]),
    ("checkpoints", ["ftplat.checkpoints", "ftplat.zero.consolidate", "ftplat.zero"]),
    ("tracking", ["ftplat.tracking"]),
    ("train", ["ftplat.train", "ftplat.zero.runtime", "ftplat.zero.estimate"]),
    ("tune", ["ftplat.tune", "ftplat.runtime"]),
    ("cli", ["ftplat.cli"]),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int:
    """The layer of the longest prefix that names ``module`` or a package holding it."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def _imports(tree: ast.Module, known: set[str]) -> set[str]:
    """ftplat modules imported anywhere in ``tree`` (function-level imports included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ftplat")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ftplat"):
            # "from ftplat.x import y" may import the module ftplat.x.y
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                      for a in node.names}
    return found & known


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(tree, set(modules)) - {name} for name, tree in modules.items()}


def test_every_module_has_a_layer(graph):
    for module in graph:
        _layer(module)


def test_no_import_runs_up_the_layers(graph):
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {i} ({LAYERS[_layer(i)][0]})"
              for m, imported in graph.items() for i in sorted(imported) if _layer(i) > _layer(m)]
    assert not upward, "\n".join(upward)


def test_no_import_cycles(graph):
    seen, stack, cycles = set(), [], []

    def visit(node: str) -> None:
        if node in stack:
            cycles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        stack.pop()

    for module in sorted(graph):
        visit(module)
    assert not cycles, [" -> ".join(c) for c in cycles]


def _string_constants(tree: ast.Module) -> list[str]:
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_each_storage_name_is_spelled_once():
    from ftplat import layout, ray_internals

    names = [layout.SUMMARY_FILE, layout.SWEEP_CONFIG_FILE, layout.TRACKING_FILE, layout.TRIAL_RESULT_FILE,
             layout.TRIAL_HISTORY_FILE, layout.TRAIN_RUN_PREFIX, ray_internals.SNAPSHOT_FILE,
             ray_internals.TUNE_RESULT_FILE]
    constants = [c for tree in _modules().values() for c in _string_constants(tree)]
    assert {name: constants.count(name) for name in names} == {name: 1 for name in names}


def _ray_internal_uses(tree: ast.Module) -> set[str]:
    """Private Ray modules imported, Tune trial internals read, Train environment switches named."""
    uses = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ray"):
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith("ray")]
        else:
            modules = []
        uses |= {m for m in modules if "._" in m}
        if isinstance(node, ast.Attribute) and node.attr in {"run_metadata", "experiment_tag", "storage_filesystem"}:
            uses.add(node.attr)
    uses |= {c for c in _string_constants(tree) if c.startswith("RAY_TRAIN_") or c == "experiment_tag"}
    return uses


def test_ray_internals_are_reached_from_one_package():
    modules = _modules()
    inside = {name for name in modules if name == "ftplat.ray_internals" or name.startswith("ftplat.ray_internals.")}
    assert all(_ray_internal_uses(modules[f"ftplat.ray_internals.{m}"])  # the check sees what it looks for
               for m in ("train_runs", "solo_sync", "lean_worker_group", "tune_trials", "cluster"))
    found = {name: uses for name, tree in modules.items() if name not in inside and (uses := _ray_internal_uses(tree))}
    assert not found


def test_names_copied_from_libraries_match_them():
    from ray.air.constants import EXPR_RESULT_FILE
    from ray.train.v2._internal import constants
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    from ftplat import layout, ray_internals, scoring
    from ftplat.config.search_space import Scope

    assert ray_internals.SNAPSHOT_FILE == constants.CHECKPOINT_MANAGER_SNAPSHOT_FILENAME
    assert ray_internals.PRINT_PATCH_ENV == constants.ENABLE_PRINT_PATCH_ENV_VAR
    assert ray_internals.WORKER_START_TIMEOUT_ENV == constants.WORKER_GROUP_START_TIMEOUT_S_ENV_VAR
    assert ray_internals.TRAIN_POLL_INTERVAL_ENV == constants.HEALTH_CHECK_INTERVAL_S_ENV_VAR
    assert ray_internals.TRAIN_POLL_INTERVAL_ENV in constants.ENV_VARS_TO_PROPAGATE  # driver -> controller
    assert ray_internals.PREEMPTION_WATCHER_ENV == constants.ENABLE_PREEMPTION_WATCHER_ENV_VAR
    assert ray_internals.PREEMPTION_WATCHER_ENV in constants.ENV_VARS_TO_PROPAGATE
    assert ray_internals.TUNE_RESULT_FILE == EXPR_RESULT_FILE
    assert ray_internals.STORAGE_MARKER_FILE == constants.VALIDATE_STORAGE_MARKER_FILENAME
    from ray._private.ray_constants import GCS_PORT_ENVIRONMENT_VARIABLE

    assert ray_internals.GCS_PORT_ENV == GCS_PORT_ENVIRONMENT_VARIABLE
    assert layout.CHECKPOINT_PREFIX == PREFIX_CHECKPOINT_DIR
    assert typing.get_args(Scope) == scoring.SCOPES
    from ray.air.constants import AIR_ENV_VARS
    from ray.tune.constants import TUNE_ENV_VARS

    from ftplat.tune.console import TUNE_FIT_ENV

    assert set(TUNE_FIT_ENV) <= AIR_ENV_VARS | TUNE_ENV_VARS


def test_the_lean_trainers_drop_only_the_unused_datasets_callback_and_the_per_run_cleaner():
    """Train's default callbacks with and without Ray Datasets: the placement-group cleaner (a
    detached process per run; the sweep driver does its job) always goes, the datasets callback
    (which starts a dataset manager process) only when the run is given no dataset."""
    import ray.train
    from ray.train.torch import TorchTrainer
    from ray.train.v2._internal.callbacks.datasets import DatasetsCallback
    from ray.train.v2._internal.callbacks.placement_group_callback import PlacementGroupCleanerCallback
    from ray.train.v2._internal.execution.controller import TrainController
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from ftplat.ray_internals import TRAIN_CONTROLLER_CLASS

    from ftplat.ray_internals import build_lean_trainer_class

    def build(cls, **kwargs):
        trainer = cls(lambda: None, scaling_config=ray.train.ScalingConfig(num_workers=1), **kwargs)
        return [type(c) for c in trainer._create_default_callbacks()]

    datasets = {"train": lambda: None}  # a dataset factory, called only once workers start
    for process_group, base in ((True, TorchTrainer), (False, DataParallelTrainer)):
        lean = build_lean_trainer_class(process_group=process_group)
        assert lean is build_lean_trainer_class(process_group=process_group) and issubclass(lean, base)
        assert DatasetsCallback in build(base) and PlacementGroupCleanerCallback in build(base)  # what Ray starts
        assert build(lean) == [c for c in build(base) if c not in (DatasetsCallback, PlacementGroupCleanerCallback)]
        assert build(lean, datasets=datasets) == [c for c in build(base, datasets=datasets)
                                                  if c is not PlacementGroupCleanerCallback]
    assert TrainController.__name__ == TRAIN_CONTROLLER_CLASS  # the class the GCS records for a run's creator


def test_the_sweep_starts_the_autoscaling_coordinator_train_asks():
    """The sweep driver starts Train's autoscaling coordinator before the first trial asks for
    it (``run_start_autoscaling_coordinator``): the same function Train's client calls, whose
    actor has a fixed name and is taken when it exists."""
    import inspect

    from ray.data._internal.cluster_autoscaler import default_autoscaling_coordinator as coordinator
    from ray.train.v2._internal.execution.scaling_policy import autoscaling_coordinator_client as client

    from ftplat.ray_internals import train_runs

    assert client.get_or_create_autoscaling_coordinator is coordinator.get_or_create_autoscaling_coordinator
    assert "get_or_create_autoscaling_coordinator()" in inspect.getsource(client.TrainAutoscalingCoordinatorClient)
    made = inspect.getsource(coordinator.get_or_create_autoscaling_coordinator)
    assert 'name="AutoscalingCoordinator"' in made and "get_if_exists=True" in made
    assert "get_or_create_autoscaling_coordinator()" in inspect.getsource(train_runs.run_start_autoscaling_coordinator)


def test_the_gcs_names_a_trial_driver_by_the_class_tune_wraps_its_function_in():
    """A trial's Train placement group is created by its driver (the controller runs there):
    the sweep driver tells those groups by the class name the GCS records, Tune's wrapper's."""
    from ray import tune
    from ray.tune.trainable.function_trainable import wrap_function

    from ftplat.ray_internals import TRIAL_DRIVER_CLASS, select_actor_class_name
    from ftplat.tune.trial import train_driver_fn

    trainable = tune.with_resources(tune.with_parameters(train_driver_fn, job={}), {"cpu": 1})
    wrapped = wrap_function(trainable)
    assert wrapped.__name__ == TRIAL_DRIVER_CLASS
    # Ray has listed it by either name.
    assert select_actor_class_name(wrapped.__qualname__) == select_actor_class_name(TRIAL_DRIVER_CLASS) \
        == TRIAL_DRIVER_CLASS != wrapped.__qualname__


@pytest.mark.parametrize("num_workers, deepspeed, process_group", [
    (1, None, False), (2, None, True), (1, {"zero_optimization": {"stage": 2}}, True),
])
def test_a_trial_has_a_process_group_only_when_its_workers_need_one(num_workers, deepspeed, process_group):
    from ray.train.backend import BackendConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from ftplat.config.schema import JobConfig
    from ftplat.tune.trial import build_trainer

    job = JobConfig.model_validate({"resources": {"num_workers": num_workers}})
    trainer = build_trainer(job, run_name="train-x", sweep_path="/tmp/unused", callbacks=[],
                            train_loop_config={"deepspeed": deepspeed})
    assert isinstance(trainer, TorchTrainer) is process_group
    assert type(trainer.backend_config) is (TorchConfig if process_group else BackendConfig)
    if process_group:  # HF's default, which Train's process group then has
        assert trainer.backend_config.timeout_s == 1800


def test_the_process_group_times_out_after_hf_args_ddp_timeout():
    """Train creates the group before HF could: HF's ddp_timeout was accepted and ignored."""
    from ftplat.config.schema import JobConfig
    from ftplat.tune.trial import build_trainer

    job = JobConfig.model_validate({"resources": {"num_workers": 2},
                                    "training": {"hf_args": {"ddp_timeout": 7200}}})
    trainer = build_trainer(job, run_name="train-x", sweep_path="/tmp/unused", callbacks=[],
                            train_loop_config={"deepspeed": None})
    assert trainer.backend_config.timeout_s == 7200


def test_a_one_worker_trial_driver_never_imports_torch():
    """What the lean one-worker trainer is for: the trial driver (and Train's controller, which
    unpickles the backend config) start without torch; only the worker imports it."""
    script = (
        "import sys\n"
        "from ftplat.config.schema import JobConfig\n"
        "from ftplat.tune.trial import build_trainer\n"
        "build_trainer(JobConfig.model_validate({}), run_name='train-x', sweep_path='/tmp/unused', callbacks=[],\n"
        "              train_loop_config={'deepspeed': None})\n"
        "print(sorted(m for m in ('torch', 'transformers', 'ray.train.torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_ray_version_check_accepts_the_verified_release_and_refuses_others():
    from ftplat.errors import UserError
    from ftplat.ray_internals import check_ray_version

    assert check_ray_version() == importlib.metadata.version("ray")
    with pytest.raises(UserError, match=r"Ray 2\.61\.0 is installed, but ftplat was verified against Ray 2\.60\.x"):
        check_ray_version("2.61.0")
    with pytest.raises(UserError, match="ray_internals"):
        check_ray_version("3.0.0")


def test_user_errors_are_value_errors_but_library_value_errors_are_not_user_errors():
    from ftplat.errors import ConfigError, UserError

    assert issubclass(ConfigError, UserError) and issubclass(UserError, ValueError)
    assert not isinstance(ValueError("from a library"), UserError)


def test_the_lean_trainers_run_trains_controller_in_the_calling_process():
    """ftplat's trainers run Train's controller in the trial driver (``build_lean_trainer_class``)
    with the arguments Train would give its actor; its reports reach Tune through a queue of
    that process (``ftplat.tune.report_channel``). What that relies on in Train 2.60: ``fit()``
    hands its controller's arguments to ``_initialize_and_run_controller``, and the controller
    is a class whose ``run`` is a coroutine and whose ``get_result`` gives ``fit()``'s result."""
    import inspect

    from ray.train.v2._internal.execution.controller import TrainController
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from ftplat.ray_internals import build_lean_trainer_class

    fit = inspect.getsource(DataParallelTrainer.fit)
    passed = {"train_fn_ref", "scaling_policy", "failure_policy", "train_run_context", "callbacks",
              "validation_config"}
    assert "self._initialize_and_run_controller(" in fit and all(f"{k}=" in fit for k in passed)
    assert passed <= set(inspect.signature(TrainController.__init__).parameters)
    assert inspect.iscoroutinefunction(TrainController.run) and not inspect.iscoroutinefunction(
        TrainController.get_result)
    for process_group in (True, False):
        lean = build_lean_trainer_class(process_group=process_group)
        assert "_initialize_and_run_controller" in vars(lean)  # not Train's, which starts an actor