"""Config files that YAML would read wrongly or not at all: a key given twice (PyYAML keeps
the last and drops the rest without a word) and a directory given as the file."""

import re

import pytest

from ftplat.config.loading import ConfigError, load_sweep_configs, parse_override_value


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_section_given_twice_is_refused_naming_the_key_and_lines(tmp_path):
    path = write(tmp_path, "job.yaml", "training:\n  learning_rate: 3.0e-5\nmodel:\n  name_or_path: bert-base-cased\n"
                                       "training:\n  num_train_epochs: 1.0\n")
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(path, None)
    message = str(err.value)
    assert message.startswith(f"{path}: not valid YAML at line 5, column 1: duplicate key 'training' (first at line 1)")
    assert "\n" not in message


def test_a_nested_key_given_twice_in_a_search_space_is_refused(tmp_path):
    path = write(tmp_path, "space.yaml", "parameters:\n"
                                         "  training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-4}\n"
                                         "  training.learning_rate: {type: uniform, low: 0.0, high: 0.1}\n")
    with pytest.raises(ConfigError, match=r"line 3, column 3: duplicate key 'training.learning_rate' \(first at line 2\)"):
        load_sweep_configs(None, path)


def test_a_merge_key_may_set_a_key_again(tmp_path):
    path = write(tmp_path, "job.yaml", "training:\n  <<: {learning_rate: 3.0e-5, seed: 1}\n  seed: 7\n")
    job, _ = load_sweep_configs(path, None)
    assert (job.training.learning_rate, job.training.seed) == (3.0e-5, 7)


def test_a_key_given_twice_on_the_command_line_is_refused():
    with pytest.raises(ConfigError, match="duplicate key 'low'"):
        load_sweep_configs(None, None, ["search.parameters.training.weight_decay={type: uniform, low: 0.0, low: 0.1}"])
    assert parse_override_value("{a: 1, b: 2}") == {"a": 1, "b": 2}


@pytest.mark.parametrize("option", ["--config", "--search-space"])
def test_a_directory_is_named_as_one(tmp_path, option):
    args = (tmp_path, None) if option == "--config" else (None, tmp_path)
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(*args)
    assert str(err.value) == f"{option} {str(tmp_path)!r} is a directory; give the YAML file in it"


def test_an_override_that_breaks_a_field_is_named_not_the_file_that_holds_a_valid_value():
    import re
    from pathlib import Path

    import yaml

    from ftplat.config.loading import build_sweep_configs

    repo = Path(__file__).resolve().parents[2]
    job, space = repo / "jobs/configs/imdb_cpu.yaml", repo / "search_spaces/imdb_cpu.yaml"
    with pytest.raises(ConfigError, match=r"^override training\.learning_rate=-1: training\.learning_rate: Input "
                                          r"should be greater than 0$"):
        load_sweep_configs(job, space, ["training.learning_rate=-1"])
    with pytest.raises(ConfigError, match=r"^override search\.num_samples=0: num_samples: "):
        load_sweep_configs(job, space, ["search.num_samples=0"])
    # The file's own bad value, beside an unrelated override, is the file's
    data = yaml.safe_load(job.read_text())
    data["training"]["learning_rate"] = -1
    with pytest.raises(ConfigError, match=f"^{re.escape(str(job))}: training\\.learning_rate: "):
        build_sweep_configs(data, {}, ["training.seed=3"], job_source=str(job))


def test_a_rule_across_a_section_blames_no_override_of_another_field_in_it(tmp_path):
    """model.num_labels from the file against an id2label it does not fit: the override of
    model.name_or_path beside them is not the cause."""
    from ftplat.config.loading import build_sweep_configs

    job = {"task": {"type": "text-classification"}, "model": {"num_labels": 3, "id2label": {0: "a", 1: "b"}}}
    with pytest.raises(ConfigError, match=r"^job.yaml: "):
        build_sweep_configs(job, {}, [f"model.name_or_path={tmp_path}"], job_source="job.yaml")


def test_a_rule_across_sections_blames_the_override_of_a_field_it_names():
    """training.fp16 from the GPU recipe against resources.use_gpu=false on the command line:
    the override is named, not the file (the message names both fields)."""
    from pathlib import Path

    job = Path(__file__).resolve().parents[2] / "jobs/configs/imdb.yaml"
    with pytest.raises(ConfigError, match=r"^override resources\.use_gpu=false: training\.fp16 is true but "):
        load_sweep_configs(job, None, ["resources.use_gpu=false", "resources.cpus_per_worker=1"])


def test_checks_after_the_schema_name_the_override_too():
    """The search space's and the adapter's checks run after the schema's; they named the file."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    job, space = repo / "jobs/configs/imdb_cpu.yaml", repo / "search_spaces/imdb_cpu.yaml"
    warmup = "search.parameters={training.warmup_steps: {type: uniform, low: 10, high: 100}}"
    with pytest.raises(ConfigError, match=f"^override {re.escape(warmup)}: search space parameters.training"):
        load_sweep_configs(job, space, [warmup])
    with pytest.raises(ConfigError, match=r"^override search.parameters.training.learning_rate.low=0: "
                                          r"parameters\.training\.learning_rate can take 0\.0"):
        load_sweep_configs(job, space, ["search.parameters.training.learning_rate.low=0",
                                        "search.parameters.training.learning_rate.type=uniform"])
    with pytest.raises(ConfigError, match=r"^override model.peft=\{method: ia3, r: 3\}: model.peft.r applies"):
        load_sweep_configs(job, space, ["model.peft={method: ia3, r: 3}"])
