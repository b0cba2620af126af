"""The job config and search-space schema: defaults, strictness, and error messages."""

from pathlib import Path

import pytest

from ftplat.config.loading import (
    ConfigError,
    apply_overrides,
    load_sweep_configs,
    parse_override_value,
    validate,
)
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_follow_the_imdb_recipe():
    job = JobConfig()
    assert job.model.name_or_path == "bert-base-uncased"
    assert job.model.id2label == {0: "neg", 1: "pos"}
    assert job.data.source == "stanfordnlp/imdb" and job.data.max_length == 160
    t = job.training
    assert (t.learning_rate, t.per_device_train_batch_size, t.weight_decay) == (2.0e-5, 16, 0.01)
    assert (t.eval_strategy, t.save_strategy, t.save_total_limit) == ("epoch", "epoch", 2)
    assert t.num_train_epochs == 3.0 and t.load_best_model_at_end
    assert t.metric_for_best_model == "eval_accuracy" and t.resolved_greater_is_better


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("training:\n  learning_rat: 1.0e-5\n", "training.learning_rat: unknown key"),
        ("modle: {}\n", "modle: unknown key"),
        ("training:\n  learning_rate: 1e-5\n", "write it as a YAML number such as 1.0e-5"),
        ("training:\n  learning_rate: 0.0\n", "training.learning_rate: Input should be greater than 0"),
        ("training:\n  learning_rate: -1.0\n", "training.learning_rate: Input should be greater than 0"),
        ("training:\n  save_total_limit: 0\n", "training.save_total_limit: Input should be greater than or equal to 1"),
        ("training:\n  metric_for_best_model: bleu\n",
         "metric_for_best_model 'eval_bleu' is not a metric of task.type text-classification"),
        ("training:\n  warmup_steps: 1.5\n", "whole number"),
        ("training:\n  save_strategy: steps\n  save_steps: 10\n", "eval_strategy ('epoch') and save_strategy ('steps') must match"),
        ("training:\n  fp16: true\n  bf16: true\n", "fp16 and bf16 cannot both be true"),
        ("model:\n  num_labels: 3\n  id2label: {0: a, 1: b}\n", "id2label keys must be 0..2"),
        ("model:\n  trainable_patterns: ['(']\n", "not a valid regular expression"),
        ("storage:\n  sweep_name: a/b\n", "storage.sweep_name"),
        ("storage:\n  storage_path: s3://b/p?endpoint_override=127.0.0.1:9000\n",
         "storage.storage_path: query parameters are not supported"),
        ("resources:\n  max_concurrent_trials: 0\n", "resources.max_concurrent_trials: Input should be greater than or equal to 1"),
        ("resources:\n  num_workers: two\n", "resources.num_workers: Input should be a valid integer"),
        ("training:\n  eval_strategy: no\n", "training.eval_strategy"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_bad_job_configs_name_the_field(tmp_path, yaml_text, expected):
    path = write(tmp_path, "job.yaml", yaml_text)
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(path, None)
    message = str(err.value)
    assert expected in message
    assert str(path) in message and "\n" not in message


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("parameters: {}\n", "parameters: is empty"),
        ("scope: best\n", "scope: Input should be 'last', 'avg', 'last-5-avg', 'last-10-avg' or 'all'"),
        ("parameters:\n  training.learning_rate: {type: loguniform, low: 1.0e-3, high: 1.0e-5}\n",
         "parameters.training.learning_rate: low (0.001) must be below high (1e-05)"),
        ("parameters:\n  training.learning_rate: {type: loguniform, low: 1e-5, high: 1.0e-3}\n",
         "write it as a YAML number"),
        ("parameters:\n  training.learning_rate: {type: uniform, low: 0.0, high: 1.0e-3}\n",
         "parameters.training.learning_rate can take 0.0, which the job config refuses"),
        ("parameters:\n  training.learnin_rate: {type: uniform, low: 0.1, high: 0.2}\n",
         "'learnin_rate' is not a field of training"),
        ("parameters:\n  training: {type: uniform, low: 0.1, high: 0.2}\n", "is a section"),
        ("parameters:\n  training.warmup_steps: {type: uniform, low: 0.0, high: 10.0}\n", "mixes a warmup ratio"),
        # every draw (84.87) was refused by its trial as a fractional step count
        ("parameters:\n  training.warmup_steps: {type: uniform, low: 10.0, high: 100.0}\n",
         "draws fractional step counts; search steps with {type: int, low: 10, high: 100}"),
        # the int form offered lies inside the range, or is not offered when none fits
        ("parameters:\n  training.warmup_steps: {type: uniform, low: 10.5, high: 99.5}\n",
         "search steps with {type: int, low: 11, high: 99}"),
        ("parameters:\n  training.warmup_steps: {type: uniform, low: 1.5, high: 1.9}\n",
         "search steps with {type: int, low, high}, or a ratio"),
        # Ray's LogUniform refused it only after Ray had started and sweep_config.json was written
        ("parameters:\n  training.warmup_steps: {type: int, low: 0, high: 100, log: true}\n",
         "parameters.training.warmup_steps: log: true needs low >= 1"),
        ("parameters:\n  training.learning_rate: {type: normal, low: 0.1, high: 0.2}\n", "does not match any of the expected tags"),
        ("objective: {metric: eval_bleu}\n", "objective.metric 'eval_bleu' is not a metric of task.type"),
        ("objective: {metric: eval_loss, mode: max}\n", "that metric is minimised; use mode: min"),
        ("num_samples: 0\n", "num_samples: Input should be greater than or equal to 1"),
        ("scheduler: {type: asha, grace_period: 9}\n", None),  # valid alone; see below
        ("points_to_evaluate:\n  - {training.learning_rate: 2.0e-5}\n", "must set exactly the parameters"),
    ],
)
def test_bad_search_spaces_name_the_field(tmp_path, yaml_text, expected):
    path = write(tmp_path, "space.yaml", yaml_text)
    if expected is None:  # a valid schema that contradicts the job: refused before Ray starts
        from ftplat.tune.spaces import build_scheduler

        job, space = load_sweep_configs(None, path)
        with pytest.raises(ValueError, match=r"scheduler.grace_period \(9\) exceeds max_t \(3\)"):
            build_scheduler(space, job)
        return
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(None, path)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_overrides_parse_numbers_and_reach_both_configs():
    assert parse_override_value("2e-5") == 2.0e-5
    assert parse_override_value("3") == 3 and isinstance(parse_override_value("3"), int)
    assert parse_override_value("true") is True
    assert parse_override_value("[pooler, classifier]") == ["pooler", "classifier"]
    job, space = load_sweep_configs(
        None,
        None,
        [
            "training.learning_rate=3e-5",
            "data.train_size=800",
            "search.num_samples=4",
            "search.scope=last-5-avg",
            "search.parameters.training.weight_decay={type: uniform, low: 0.0, high: 0.3}",
        ],
    )
    assert job.training.learning_rate == 3.0e-5 and job.data.train_size == 800
    assert space.num_samples == 4 and space.scope == "last-5-avg"
    assert space.parameters["training.weight_decay"].high == 0.3


def test_override_errors():
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["training.learning_rate"])
    with pytest.raises(ConfigError, match="is a value, not a section"):
        apply_overrides({"a": 1}, ["a.b=2"])
    with pytest.raises(ConfigError, match="training.num_train_epochs: Input should be greater than 0"):
        load_sweep_configs(None, None, ["training.num_train_epochs=0"])


def test_local_paths_become_absolute(tmp_path, monkeypatch):
    (tmp_path / "model").mkdir()
    monkeypatch.chdir(tmp_path)
    job, _ = load_sweep_configs(None, None, ["model.name_or_path=./model", "storage.storage_path=out"])
    assert job.model.name_or_path == str(tmp_path / "model")
    assert job.storage.storage_path == str(tmp_path / "out")
    assert job.data.source == "stanfordnlp/imdb"  # hub ids stay as they are


def test_configs_cross_process_boundaries_as_plain_dicts():
    job = JobConfig()
    assert JobConfig.model_validate(job.model_dump()) == job
    space = SearchSpaceConfig()
    assert validate(SearchSpaceConfig, space.model_dump(), source="x") == space


@pytest.mark.parametrize("job_file", sorted((REPO / "jobs" / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_job_configs_validate(job_file):
    load_sweep_configs(job_file, None)


@pytest.mark.parametrize("space_file", sorted((REPO / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_search_spaces_validate(space_file):
    # A search space pairs with the job config of its name (a regression space's objective
    # is eval_mse, which the default text-classification job does not log).
    paired = REPO / "jobs" / "configs" / space_file.name
    load_sweep_configs(paired if paired.exists() else None, space_file)


def test_each_task_ships_an_example_pair():
    """One example job config and search space per task, named so a reader finds them."""
    import yaml

    from ftplat.tasks import TASK_NAMES

    found = {}
    for pattern in ("*pair*", "*regression*", "*multi_label*", "*ner*", "*masked_lm*", "*causal_lm*"):
        jobs = sorted((REPO / "jobs" / "configs").glob(f"{pattern}.yaml"))
        assert jobs, f"no jobs/configs/{pattern}.yaml"
        for job_file in jobs:
            assert (REPO / "search_spaces" / job_file.name).exists(), f"no search_spaces/{job_file.name}"
            found[job_file.name] = (yaml.safe_load(job_file.read_text()).get("task") or {}).get("type")
    assert set(found.values()) == set(TASK_NAMES), found


def test_readme_config_reference_is_current():
    from ftplat.config.reference import build_reference_markdown

    assert build_reference_markdown() in (REPO / "README.md").read_text(), (
        "README.md's config reference is stale: run `python -m ftplat.config.reference --write README.md`"
    )


def test_the_config_reference_reads_as_the_yaml_is_written():
    from ftplat.config.reference import build_reference_markdown

    rows = {line.split("|")[1].strip(" `"): line for line in build_reference_markdown().splitlines()
            if line.startswith("| `")}
    assert "typing." not in "".join(rows.values()) and "ftplat.config" not in "".join(rows.values())
    # the scheduler is one of two tagged sections, never null, and only ASHA's keys follow
    assert "`{type: fifo}` or `{type: asha, ...}`" in rows["scheduler"] and "None" not in rows["scheduler"]
    assert "'fifo'" not in "".join(rows.values())
    assert "section or None" in rows["model.peft"]  # a real optional section
    # the objective's defaults follow the job, not a fixed metric
    assert "metric_for_best_model" in rows["objective.metric"].split("|")[3]


def test_scheduler_and_optimizer_names_are_the_ones_transformers_knows():
    import typing

    from transformers.trainer_utils import SchedulerType
    from transformers.training_args import OptimizerNames

    from ftplat.config.schema import TrainingConfig

    allowed = typing.get_args(TrainingConfig.model_fields["lr_scheduler_type"].annotation)
    assert set(allowed) <= {s.value for s in SchedulerType}
    for name in ("adamw_torch", "adamw_torch_fused", "adafactor", "sgd"):
        assert name in {o.value for o in OptimizerNames} and TrainingConfig(optim=name).optim == name
    with pytest.raises(ValueError, match="'adamw_fake' is not an optimizer transformers knows; closest: "):
        TrainingConfig(optim="adamw_fake")


@pytest.mark.parametrize(
    "job_yaml, space_yaml, overrides, expected",
    [
        ("", None, [], "--config file is empty (or only comments)"),
        (None, "# nothing yet\n", [], "--search-space file is empty"),
        ("training:\n\tseed: 1\n", None, [], "not valid YAML at line 2, column 1"),
        ("num_samples: 4\nscheduler: {type: fifo}\n", None, [], "num_samples, scheduler are search-space keys; "
                                                              "pass this file with --search-space"),
        (None, "training: {seed: 1}\n", [], "training is a job-config key; pass this file with --config"),
        (None, None, ["scope=avg"], "scope is a search-space key; prefix search-space overrides with 'search.'"),
        (None, None, ["search.data.train_size=10"], "data is a job-config key; job-config overrides take no"),
        (None, None, ["training.fp16=true"], "training.fp16 is true but resources.use_gpu is false"),
    ],
)
def test_misplaced_and_empty_inputs(tmp_path, job_yaml, space_yaml, overrides, expected):
    job = write(tmp_path, "job.yaml", job_yaml) if job_yaml is not None else None
    space = write(tmp_path, "space.yaml", space_yaml) if space_yaml is not None else None
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(job, space, overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert "(top level)" not in str(err.value)


def test_fp16_with_gpu_workers_is_accepted():
    job, _ = load_sweep_configs(None, None, ["training.fp16=true", "resources.use_gpu=true"])
    assert job.training.fp16 and job.resources.use_gpu
