"""Each point of ``points_to_evaluate`` is checked before any cluster work: a value of the
right type, one its parameter can take, and a valid job config once applied."""

import pytest

from ftplat.config.loading import ConfigError, build_sweep_configs, load_sweep_configs

LR = {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-4}
BATCH = {"type": "choice", "values": [8, 16]}
EPOCHS = {"type": "int", "low": 1, "high": 3}


def refused(space, job=None):
    with pytest.raises(ConfigError) as err:
        build_sweep_configs(job or {}, space)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("params, point, expected", [
    ({"training.learning_rate": LR}, {"training.learning_rate": 5},
     "points_to_evaluate[0].training.learning_rate: 5 is outside the searched range [1e-05, 0.0001]"),
    ({"training.learning_rate": LR}, {"training.learning_rate": 0.5}, "outside the searched range"),
    ({"training.learning_rate": LR}, {"training.learning_rate": "2e-5"},
     "points_to_evaluate[0].training.learning_rate: got the string '2e-5': write it as a YAML number such as 2.0e-5"),
    ({"training.learning_rate": LR}, {"training.learning_rate": True}, "must be a number, got True"),
    ({"training.per_device_train_batch_size": BATCH}, {"training.per_device_train_batch_size": 0},
     "points_to_evaluate[0].training.per_device_train_batch_size: 0 is not one of the choices [8, 16]"),
    ({"training.num_train_epochs": EPOCHS}, {"training.num_train_epochs": 4}, "(high included)"),
    ({"training.per_device_train_batch_size": {"type": "int", "low": 8, "high": 32}},
     {"training.per_device_train_batch_size": 16.5}, "must be a whole number, got 16.5"),
    ({"training.load_best_model_at_end": {"type": "choice", "values": [0, 1]}},
     {"training.load_best_model_at_end": True}, "True is not one of the choices [0, 1]"),
])
def test_a_value_its_parameter_cannot_take_is_refused(params, point, expected):
    assert expected in refused({"parameters": params, "points_to_evaluate": [point]})


def test_a_point_that_gives_an_invalid_job_is_refused():
    # Each value alone is valid against the job; together they ask float16 on CPU workers.
    params = {"training.fp16": {"type": "choice", "values": [True, False]},
              "resources.use_gpu": {"type": "choice", "values": [True, False]}}
    message = refused({"parameters": params, "points_to_evaluate": [{"training.fp16": True, "resources.use_gpu": False}]},
                      job={"resources": {"use_gpu": True}})
    assert "points_to_evaluate[0] gives a job config that is refused: training.fp16 is true" in message


def test_a_yaml_file_point_written_2e_5_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("parameters:\n  training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-4}\n"
                    "points_to_evaluate:\n  - {training.learning_rate: 2e-5}\n")
    with pytest.raises(ConfigError, match=r"write it as a YAML number such as 2\.0e-5"):
        load_sweep_configs(None, path)


def test_points_inside_the_space_load():
    params = {"training.learning_rate": LR, "training.per_device_train_batch_size": BATCH,
              "training.num_train_epochs": EPOCHS}
    points = [{"training.learning_rate": 1.0e-5, "training.per_device_train_batch_size": 16,
               "training.num_train_epochs": 3}]
    _, space = build_sweep_configs({}, {"parameters": params, "points_to_evaluate": points})
    assert space.points_to_evaluate == points


def test_a_command_line_point_reads_2e_5_as_a_number():
    _, space = load_sweep_configs(None, None, [
        "search.parameters={training.learning_rate: {type: loguniform, low: 1e-5, high: 1e-4}}",
        "search.points_to_evaluate=[{training.learning_rate: 2e-5}]"])
    assert space.points_to_evaluate == [{"training.learning_rate": 2.0e-5}]
