"""``model.config_overrides``: run_mlm.py's ``--config_overrides`` (the user's Longformer project
changed its attention window), set on the model's config before the model is built, checked
against the config's fields before any work, and searchable per trial."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ftplat.cli.sweep import main
from ftplat.config.loading import build_trial_job, load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.train.modeling import build_model
from ftplat.tune.plan import read_parameter_count


def test_overrides_reach_the_model_the_plan_and_a_trial(tiny_model_dir):
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", "model.config_overrides={hidden_dropout_prob: 0.3}",
        "search.parameters.model.config_overrides.hidden_dropout_prob={type: choice, values: [0.0, 0.2]}"])
    assert build_model(job).config.hidden_dropout_prob == 0.3
    trial = JobConfig.model_validate(build_trial_job(job.model_dump(), {"model.config_overrides.hidden_dropout_prob":
                                                                        0.2}))
    assert build_model(trial).config.hidden_dropout_prob == 0.2
    smaller = job.model_copy(update={"model": job.model.model_copy(update={"config_overrides":
                                                                            {"num_hidden_layers": 1}})})
    assert read_parameter_count(smaller).total < read_parameter_count(job).total


def test_an_override_the_config_lacks_is_refused_before_any_work(tmp_path, tiny_model_dir, capsys):
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--storage", str(tmp_path / "s"),
               "model.config_overrides={attention_windw: 256}"])
    err = capsys.readouterr().err
    assert rc == 2 and "model.config_overrides ['attention_windw'] are not fields of BertConfig" in err
    assert "hidden_dropout_prob" in err and not (tmp_path / "s").exists()


def test_fields_ftplat_sets_are_refused_naming_where_they_go():
    with pytest.raises(ValidationError, match="num_labels is set by ftplat from model.num_labels"):
        JobConfig.model_validate({"model": {"config_overrides": {"num_labels": 3}}})


def test_an_override_inside_a_field_is_not_blamed_for_a_rule_the_file_broke(tmp_path):
    """The file sets both model.peft and model.trainable_patterns; model.peft.r=16 is valid
    and not what the rule is about: the file is to blame."""
    import pytest

    from ftplat.config.loading import load_sweep_configs

    job = tmp_path / "job.yaml"
    job.write_text("model: {peft: {method: lora}, trainable_patterns: [classifier]}\n")
    with pytest.raises(ValueError, match=r"^.*job.yaml: model: trainable_patterns and peft both choose"):
        load_sweep_configs(str(job), None, ["model.peft.r=16"])
    with pytest.raises(ValueError, match=r"^override data.eval_split=train: data: eval_split 'train' is the train"):
        load_sweep_configs(None, None, ["data.eval_split=train"])
