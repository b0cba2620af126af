"""``search.parameters.<path>.<field>=value`` changes one field of a parameter already in the
space, and ``2e-5`` inside ``{...}`` on the command line is a number, as it is on its own."""

import pytest

from ftplat.config.loading import ConfigError, apply_overrides, load_sweep_configs, parse_override_value

LR = "training.learning_rate"


def test_one_end_of_a_default_range_changes_and_the_rest_stays():
    _, space = load_sweep_configs(None, None, [f"search.parameters.{LR}.low=1e-6"])
    lr = space.parameters[LR]
    assert (lr.type, lr.low, lr.high) == ("loguniform", 1.0e-6, 1.0e-4)
    assert set(space.parameters) == {LR, "training.warmup_steps", "training.weight_decay"}


def test_one_end_of_a_file_range_changes(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(f"parameters:\n  {LR}: {{type: loguniform, low: 1.0e-5, high: 1.0e-4}}\n")
    _, space = load_sweep_configs(None, path, [f"search.parameters.{LR}.high=3e-4"])
    assert (space.parameters[LR].low, space.parameters[LR].high) == (1.0e-5, 3.0e-4)
    # A parameter the file does not search has no end to change.
    with pytest.raises(ConfigError, match=r"parameters\.training\.weight_decay is not in parameters \(it has "
                                          r"training\.learning_rate\), so it has no high to set; give the whole entry"):
        load_sweep_configs(None, path, ["search.parameters.training.weight_decay.high=0.3"])


def test_a_field_of_an_unknown_parameter_is_still_a_new_parameter_path():
    data = apply_overrides({"parameters": {LR: {"type": "uniform"}}}, ["parameters.training.seed.low=1"],
                           dotted_sections=("parameters",))
    assert data["parameters"]["training.seed.low"] == 1


def test_a_field_of_a_choice_changes():
    _, space = load_sweep_configs(None, None, [
        "search.parameters.training.per_device_train_batch_size={type: choice, values: [8, 16]}",
        "search.parameters.training.per_device_train_batch_size.values=[16, 32]"])
    assert space.parameters["training.per_device_train_batch_size"].values == [16, 32]


def test_a_wrong_end_is_refused_naming_the_parameter():
    with pytest.raises(ConfigError, match=rf"parameters.{LR}: low \(0.001\) must be below high \(0.0001\)"):
        load_sweep_configs(None, None, [f"search.parameters.{LR}.low=1e-3"])


@pytest.mark.parametrize("text, value", [
    ("{low: 1e-6, high: 1e-4}", {"low": 1.0e-6, "high": 1.0e-4}),
    ("[2e-5, 3E-5, -1e-3, +4e2, 1.5e3, .5e1]", [2.0e-5, 3.0e-5, -1.0e-3, 400.0, 1500.0, 5.0]),
    ("2e-5", 2.0e-5), ("3", 3), ("1.0e-5", 1.0e-5), ("true", True), ("1_000", 1000), ("v1e5", "v1e5"),
])
def test_exponent_numbers_are_numbers_everywhere_on_the_command_line(text, value):
    parsed = parse_override_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_a_flow_mapping_range_with_exponents_loads():
    _, space = load_sweep_configs(None, None, [f"search.parameters.{LR}={{type: loguniform, low: 1e-6, high: 1e-4}}"])
    assert (space.parameters[LR].low, space.parameters[LR].high) == (1.0e-6, 1.0e-4)


def test_a_two_part_path_ending_in_a_field_name_is_still_a_parameter():
    # task.type ends in "type", as every parameter's fields do: it is a path, not a field.
    with pytest.raises(ConfigError, match=r"parameters\.task\.type: cannot vary per trial"):
        load_sweep_configs(None, None, ["search.parameters.task.type={type: choice, values: [regression]}"])
