"""``--name``, ``--storage``, ``--model`` and ``--dataset`` set text fields to the text given,
whatever YAML would read it as; a ``key=value`` override that YAML reads as a date, number or
boolean where text belongs is refused with the quotes that fix it."""

import pytest

from ftplat.cli.sweep import build_overrides, parse_sweep_args
from ftplat.config.loading import ConfigError, build_literal_override, load_sweep_configs


@pytest.mark.parametrize("name", ["2024-05-01", "2024", "yes", "1e5", "null", "on", "0x1F"])
def test_a_shorthand_value_is_the_text_given(name):
    args = parse_sweep_args(["--name", name, "--storage", "2025", "--model", "true", "--dataset", "3.5"])
    job, _ = load_sweep_configs(None, None, build_overrides(args))
    assert job.storage.sweep_name == name
    assert job.model.name_or_path == "true" and job.data.source == "3.5"
    assert job.storage.storage_path.endswith("/2025")


def test_plain_text_stays_unquoted_and_explicit_overrides_still_win():
    assert build_literal_override("storage.sweep_name", "n") == "storage.sweep_name=n"
    assert build_literal_override("storage.sweep_name", "2024") == 'storage.sweep_name="2024"'
    args = parse_sweep_args(["--name", "2024", "storage.sweep_name=later"])
    job, _ = load_sweep_configs(None, None, build_overrides(args))
    assert job.storage.sweep_name == "later"


@pytest.mark.parametrize("override, shown", [
    ("storage.sweep_name=2024-05-01", "'2024-05-01'"),
    ("storage.sweep_name=2024", "'2024'"),
    ("storage.sweep_name=yes", "'...'"),
])
def test_an_override_read_as_another_type_is_refused_with_the_quotes(override, shown):
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(None, None, [override])
    message = str(err.value)
    assert "storage.sweep_name: Input should be a valid string" in message
    assert f"quote the value to keep it text ({shown} in a file" in message and "\n" not in message


def test_a_quoted_override_is_text():
    job, _ = load_sweep_configs(None, None, ["storage.sweep_name='2024'"])
    assert job.storage.sweep_name == "2024"
