"""Only job fields each trial applies to its own copy of the job can be searched: the data is
tokenized once per sweep with the job's model, and storage, retention, tracking and the
checkpoint ranking are set once for the whole sweep."""

import pytest

from ftplat.config.loading import ConfigError, build_sweep_configs
from ftplat.config.search_space import PER_TRIAL_RULES, read_per_sweep_reason

LORA_JOB = {"model": {"peft": {"method": "lora"}}}
MLM_JOB = {"task": {"type": "masked-lm"}}


def space(path, param):
    return {"parameters": {path: param}}


@pytest.mark.parametrize("path, param, why", [
    ("data.max_length", {"type": "int", "low": 64, "high": 256}, "tokenized once per sweep"),
    ("data.train_size", {"type": "int", "low": 100, "high": 800}, "tokenized once per sweep"),
    ("data.source", {"type": "choice", "values": ["stanfordnlp/imdb", "glue"]}, "tokenized once per sweep"),
    ("model.name_or_path", {"type": "choice", "values": ["bert-base-uncased", "roberta-base"]}, "tokenizer"),
    ("storage.storage_path", {"type": "choice", "values": ["/a", "/b"]}, "storage folder"),
    ("storage.sweep_name", {"type": "choice", "values": ["a", "b"]}, "storage folder"),
    ("retention.keep_top_k_trials", {"type": "int", "low": 1, "high": 3}, "one retention policy"),
    ("retention.keep_trial_best", {"type": "choice", "values": [True, False]}, "one retention policy"),
    ("tracking.enabled", {"type": "choice", "values": [True, False]}, "MLflow"),
    ("task.type", {"type": "choice", "values": ["text-classification", "regression"]}, "tokenized"),
    ("training.metric_for_best_model", {"type": "choice", "values": ["eval_accuracy", "eval_f1"]}, "ranks"),
    ("training.save_total_limit", {"type": "int", "low": 1, "high": 3}, "retention"),
    ("resources.max_concurrent_trials", {"type": "int", "low": 1, "high": 2}, "once per sweep"),
    ("resources.trial_driver_cpus", {"type": "uniform", "low": 0.1, "high": 0.5}, "once per sweep"),
    ("model.peft", {"type": "choice", "values": [None, {"method": "lora"}]}, "not whether there is one"),
])
def test_a_field_read_once_per_sweep_is_refused(path, param, why):
    with pytest.raises(ConfigError) as err:
        build_sweep_configs({}, space(path, param))
    message = str(err.value)
    assert f"parameters.{path}: cannot vary per trial" in message and why in message
    assert "set it in the job config" in message and "\n" not in message


@pytest.mark.parametrize("job, path, param", [
    ({}, "training.learning_rate", {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-4}),
    ({}, "training.num_train_epochs", {"type": "choice", "values": [1.0, 2.0]}),
    ({}, "training.per_device_train_batch_size", {"type": "choice", "values": [8, 16]}),
    ({}, "training.hf_args.label_smoothing_factor", {"type": "uniform", "low": 0.0, "high": 0.1}),
    (LORA_JOB, "model.peft.r", {"type": "choice", "values": [4, 8]}),
    ({}, "model.trainable_patterns", {"type": "choice", "values": [["classifier"], ["pooler", "classifier"]]}),
    (MLM_JOB, "task.mlm_probability", {"type": "uniform", "low": 0.1, "high": 0.3}),
    ({}, "resources.num_workers", {"type": "int", "low": 1, "high": 2}),
    ({}, "resources.cpus_per_worker", {"type": "choice", "values": [1.0, 2.0]}),
    ({}, "resources.max_failures", {"type": "int", "low": 0, "high": 2}),
])
def test_a_field_each_trial_applies_itself_is_searched(job, path, param):
    _, loaded = build_sweep_configs(job, space(path, param))
    assert list(loaded.parameters) == [path]


def test_every_field_of_the_job_has_a_rule():
    from ftplat.config.schema import JobConfig

    def ruled(path):
        return any(path == p or (p.endswith(".") and path.startswith(p)) for p, _ in PER_TRIAL_RULES)

    for section, field in JobConfig.model_fields.items():
        for name in field.annotation.model_fields:
            assert ruled(f"{section}.{name}"), f"{section}.{name} has no rule in PER_TRIAL_RULES"
    assert read_per_sweep_reason("training.warmup_steps") is None
    assert read_per_sweep_reason("model.peft.lora_alpha") is None
    assert read_per_sweep_reason("model.num_labels") and read_per_sweep_reason("task.threshold")
