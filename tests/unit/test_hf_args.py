"""``training.hf_args``: any other TrainingArguments field passes through to every trial's
``TrainingArguments``; the fields ftplat sets, those with their own setting, unknown names and
values of the wrong type are refused with the reason; the search space can vary them; and a
real Trainer trains a tiny BERT with two of them."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError
from transformers import TrainingArguments

from ftplat.config.loading import load_sweep_configs, set_dotted
from ftplat.config.schema import JobConfig
from ftplat.errors import ConfigError
from ftplat.train.arguments import build_training_arguments

FIELDS = {f.name for f in dataclasses.fields(TrainingArguments) if f.init}
#: transformers 5 replaced ``group_by_length: true`` with ``train_sampling_strategy: group_by_length``.
GROUP_BY_LENGTH = ({"group_by_length": True} if "group_by_length" in FIELDS
                   else {"train_sampling_strategy": "group_by_length"})


def job_with(hf_args: dict, **training) -> JobConfig:
    return JobConfig(training={**training, "hf_args": hf_args})


def test_accepted_fields_reach_the_training_arguments(tmp_path):
    hf_args = {"label_smoothing_factor": 0.1, "gradient_checkpointing": True, "eval_accumulation_steps": 8,
               "torch_compile": True, **GROUP_BY_LENGTH}
    job = job_with(hf_args)
    assert job.training.hf_args == hf_args
    args = build_training_arguments(job, output_dir=str(tmp_path))  # builds the arguments only: nothing compiles
    plain = build_training_arguments(JobConfig(), output_dir=str(tmp_path))
    for name, value in hf_args.items():
        assert getattr(args, name) == value and getattr(plain, name) != value, name
    if "activation_checkpointing" in FIELDS:  # gradient_checkpointing is its deprecated alias
        assert args.activation_checkpointing is True and not plain.activation_checkpointing
    # ftplat's own fields keep ftplat's values
    assert args.output_dir == str(tmp_path) and args.report_to == [] and args.learning_rate == 2e-5
    assert args.metric_for_best_model == "eval_accuracy" and args.load_best_model_at_end is True


def test_an_int_is_taken_for_a_float_field_and_null_where_allowed(tmp_path):
    args = build_training_arguments(job_with({"label_smoothing_factor": 0, "eval_accumulation_steps": None}),
                                    output_dir=str(tmp_path))
    assert args.label_smoothing_factor == 0 and args.eval_accumulation_steps is None


def test_a_trials_value_joins_the_jobs_hf_args(tmp_path):
    # what a trial does with a sampled training.hf_args.<field> (ftplat.tune.trial: set_dotted)
    job = job_with({"gradient_checkpointing": True})
    trial = JobConfig.model_validate(set_dotted(job.model_dump(), {"training.hf_args.label_smoothing_factor": 0.15}))
    assert trial.training.hf_args == {"gradient_checkpointing": True, "label_smoothing_factor": 0.15}
    args = build_training_arguments(trial, output_dir=str(tmp_path))
    assert args.label_smoothing_factor == 0.15 and args.gradient_checkpointing is True


@pytest.mark.parametrize("hf_args, message", [
    ({"output_dir": "/tmp/elsewhere"},
     "'output_dir' is set by ftplat and cannot be passed through: each trial writes to node-local scratch and "
     "Ray storage holds the checkpoints (set storage.storage_path)"),
    ({"report_to": ["wandb"]},
     "'report_to' is set by ftplat and cannot be passed through: ftplat reports to Ray Tune and MLflow itself "
     "(tracking section)"),
    ({"learning_rate": 1.0e-3},
     "'learning_rate' has its own setting: use training.learning_rate instead of training.hf_args.learning_rate"),
    ({"num_train_epochs": 2.0}, "use training.num_train_epochs instead of training.hf_args.num_train_epochs"),
    ({"label_smothing_factor": 0.1},
     "'label_smothing_factor' is not a TrainingArguments field of the installed transformers; "
     "did you mean 'label_smoothing_factor'?"),
    ({"label_smoothing_factor": "0.1"}, "label_smoothing_factor must be float, got str '0.1'"),
    ({"gradient_checkpointing": 1}, "gradient_checkpointing must be bool or null, got int 1"),
    ({"eval_accumulation_steps": 8.5}, "eval_accumulation_steps must be int or null, got float 8.5"),
    ({"torch_compile": "yes"}, "torch_compile must be bool, got str 'yes'"),
    # Both break ftplat's own metrics in every trial (a KeyError on metric_for_best_model; a
    # compute_metrics signature error pointing at code the user did not write)
    ({"prediction_loss_only": True}, "'prediction_loss_only' is set by ftplat and cannot be passed through: every "
                                     "evaluation computes the task's metrics"),
    ({"batch_eval_metrics": True}, "'batch_eval_metrics' is set by ftplat and cannot be passed through"),
    # Names from guides and notebooks that transformers 5 removed: where the setting lives now
    ({"warmup_ratio": 0.1}, "'warmup_ratio' is not a TrainingArguments field of transformers 5: use "
                            "training.warmup_steps, where a value below 1 is a fraction of the training steps"),
    ({"save_safetensors": False}, "leave it out: transformers 5 always saves safetensors"),
    ({"no_cuda": True}, "use resources.use_gpu"),
    ({"ray_scope": "last"}, "use the search space's scope (search.scope=last-5-avg)"),
])
def test_refused_fields_name_the_reason(hf_args, message):
    with pytest.raises(ValidationError) as err:
        job_with(hf_args)
    assert message in str(err.value)


@pytest.mark.parametrize("override, message", [
    ("training.label_smoothing_factor=0.1", "training.label_smoothing_factor: unknown key; a TrainingArguments field "
                                            "without a setting of its own: give it as "
                                            "training.hf_args.label_smoothing_factor"),
    ("training.evaluation_strategy=epoch", "training.evaluation_strategy: unknown key; use training.eval_strategy"),
    ("training.report_to=none", "training.report_to: unknown key; set by ftplat: ftplat reports to Ray Tune"),
    ("training.labl=1", "training.labl: unknown key (check the spelling; see the config reference in README.md)"),
    ("search.parameters.training.label_smoothing_factor={type: uniform, low: 0.0, high: 0.2}",
     "'label_smoothing_factor' is not a field of training; a TrainingArguments field without a setting of its own: "
     "give it as parameters.training.hf_args.label_smoothing_factor"),
])
def test_a_training_arguments_name_under_training_says_where_it_goes(override, message):
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(None, None, [override])
    assert message in str(err.value)


def test_an_unknown_name_without_a_close_match_gets_no_guess():
    with pytest.raises(ValidationError) as err:
        job_with({"zzz_qqq": 1})
    assert "'zzz_qqq' is not a TrainingArguments field of the installed transformers" in str(err.value)
    assert "did you mean" not in str(err.value)


def test_refusals_name_the_yaml_path_from_overrides():
    with pytest.raises(ConfigError, match=r"^override training.hf_args.report_to=\[wandb\]: training.hf_args: "
                                          r"'report_to' is set by ftplat"):
        load_sweep_configs(None, None, ["training.hf_args.report_to=[wandb]"])
    with pytest.raises(ConfigError, match=r"training.hf_args: 'learning_rate' has its own setting"):
        load_sweep_configs(None, None, ["training.hf_args.learning_rate=1.0e-3"])
    job, _ = load_sweep_configs(None, None, ["training.hf_args.label_smoothing_factor=0.1"])
    assert job.training.hf_args == {"label_smoothing_factor": 0.1}


def test_every_field_ftplat_sets_is_refused_or_taken_from_hf_args(tmp_path, monkeypatch):
    """Each keyword build_training_arguments passes itself, given again in hf_args, would fail
    every trial's worker with "got multiple values for keyword argument": it is refused, or (a
    default ftplat gives way to, such as ddp_find_unused_parameters) passed once, as given."""
    import ftplat.train.arguments as arguments

    passed = {}
    monkeypatch.setattr(arguments, "TrainingArguments", lambda **kwargs: passed.update(kwargs) or kwargs)
    arguments.build_training_arguments(JobConfig(), output_dir=str(tmp_path))
    clashing = []
    for name in sorted(passed):
        try:
            job = job_with({name: passed[name]})
        except ValidationError:
            continue
        try:
            assert arguments.build_training_arguments(job, output_dir=str(tmp_path))[name] == passed[name]
        except TypeError:
            clashing.append(name)
    assert clashing == [], f"hf_args accepts {clashing}, which build_training_arguments also passes"


@pytest.mark.parametrize("parameter", [
    "{type: uniform, low: 0.0, high: 0.2}",
    "{type: choice, values: [0.0, 0.1]}",
])
def test_the_search_space_can_vary_an_hf_arg(parameter):
    job, space = load_sweep_configs(None, None, [
        "training.hf_args.gradient_checkpointing=true",
        f"search.parameters.training.hf_args.label_smoothing_factor={parameter}",
    ])
    # Added beside the embedded default's parameters, which stay searched.
    assert "training.hf_args.label_smoothing_factor" in space.parameters
    assert "training.learning_rate" in space.parameters
    assert job.training.hf_args == {"gradient_checkpointing": True}


@pytest.mark.parametrize("path, parameter, message", [
    ("eval_accumulation_steps", "{type: uniform, low: 1.0, high: 8.0}",
     "parameters.training.hf_args.eval_accumulation_steps can take 1.0, which the job config refuses: "
     "training.hf_args: eval_accumulation_steps must be int or null, got float 1.0"),
    ("label_smoothing_factor", "{type: choice, values: [0.1, high]}",
     "parameters.training.hf_args.label_smoothing_factor can take 'high', which the job config refuses: "
     "training.hf_args: label_smoothing_factor must be float, got str 'high'"),
    ("label_smothing_factor", "{type: uniform, low: 0.0, high: 0.2}",
     "did you mean 'label_smoothing_factor'?"),
    ("output_dir", "{type: choice, values: [a, b]}", "'output_dir' is set by ftplat and cannot be passed through"),
])
def test_a_bad_search_value_is_refused_before_the_sweep(path, parameter, message):
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(None, None, [f"search.parameters.training.hf_args.{path}={parameter}"])
    assert message in str(err.value)


def test_int_and_choice_parameters_are_checked_at_each_candidate():
    # int ranges give ints at both ends: an int field takes them, a bool field refuses the low end
    prefix = "search.parameters.training.hf_args"
    load_sweep_configs(None, None, [f"{prefix}.eval_accumulation_steps={{type: int, low: 1, high: 8}}"])
    with pytest.raises(ConfigError, match=r"gradient_checkpointing can take 0, which the job config refuses"):
        load_sweep_configs(None, None, [f"{prefix}.gradient_checkpointing={{type: int, low: 0, high: 1}}"])
    with pytest.raises(ConfigError, match=r"torch_compile can take 'no', which the job config refuses"):
        load_sweep_configs(None, None, [f"{prefix}.torch_compile={{type: choice, values: [true, false, 'no']}}"])


def test_a_tiny_trainer_trains_with_gradient_checkpointing_and_label_smoothing(
        tmp_path, tiny_model_dir, sentiment_data_dir, monkeypatch):
    import torch
    import transformers.modeling_utils

    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.train.worker import build_trainer

    checkpointed = []
    real_checkpoint = transformers.modeling_utils.checkpoint

    def counting_checkpoint(*args, **kwargs):
        checkpointed.append(1)
        return real_checkpoint(*args, **kwargs)

    # the function the model's checkpointed layers call (bound when checkpointing is enabled)
    monkeypatch.setattr(transformers.modeling_utils, "checkpoint", counting_checkpoint)

    epsilon, steps = 0.2, 2
    job = JobConfig(
        model={"name_or_path": str(tiny_model_dir)},
        data={"source": str(sentiment_data_dir), "max_length": 32, "train_size": 64, "eval_size": 32},
        training={"max_steps": steps, "per_device_train_batch_size": 8, "per_device_eval_batch_size": 32,
                  "learning_rate": 1.0e-3, "eval_strategy": "steps", "save_strategy": "steps", "eval_steps": steps,
                  "logging_steps": 1,
                  "hf_args": {"gradient_checkpointing": True, "label_smoothing_factor": epsilon}},
    )
    tables = build_tokenized_tables(job)
    trainer = build_trainer(job, train_table=tables.train, eval_table=tables.eval, output_dir=str(tmp_path / "out"))
    assert trainer.args.gradient_checkpointing is True and trainer.args.label_smoothing_factor == epsilon

    # the loss is label-smoothed: (1 - eps) * CE + eps * mean over classes of -log p, by hand
    model = trainer.model
    model.eval()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    bias = model.classifier.bias.detach().clone()
    with torch.no_grad():
        # confident logits, so the smoothed loss is far from the plain cross-entropy
        model.classifier.bias.copy_(torch.tensor([3.0, -3.0]))
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        log_p = torch.log_softmax(logits.float(), dim=-1)
        ce = -log_p.gather(1, batch["labels"][:, None]).mean()
        expected = (1 - epsilon) * ce + epsilon * (-log_p).mean()
        loss = trainer.compute_loss(model, dict(batch))
        model.classifier.bias.copy_(bias)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert abs(loss.item() - ce.item()) > 0.1

    layers = model.bert.encoder.layer
    before = layers[0].attention.self.query.weight.detach().clone()
    output = trainer.train()
    assert output.global_step == steps and torch.isfinite(torch.tensor(output.training_loss))
    # every encoder layer of every training step went through activation checkpointing
    # (evaluation runs without it), and the gradients still reached the checkpointed layers
    assert len(checkpointed) == len(layers) * steps
    assert not torch.equal(before, layers[0].attention.self.query.weight.detach())
    assert any("eval_accuracy" in entry for entry in trainer.state.log_history)


def test_the_old_group_by_length_spelling_works():
    """Guides and notebooks write ``group_by_length: true``; transformers 5 spells it
    ``train_sampling_strategy: group_by_length``. Either gives length-grouped batches."""
    job = JobConfig.model_validate({"training": {"hf_args": {"group_by_length": True}}})
    if "group_by_length" in FIELDS:
        assert job.training.hf_args == {"group_by_length": True}
    else:
        assert job.training.hf_args == {"train_sampling_strategy": "group_by_length"}
        assert JobConfig.model_validate({"training": {"hf_args": {"group_by_length": False}}}).training.hf_args == {}
        with pytest.raises(ValidationError, match="old spelling of train_sampling_strategy"):
            JobConfig.model_validate({"training": {"hf_args": {"group_by_length": True,
                                                                "train_sampling_strategy": "random"}}})
        with pytest.raises(ValidationError, match="train_sampling_strategy must be one of"):
            JobConfig.model_validate({"training": {"hf_args": {"train_sampling_strategy": "nope"}}})
