"""``model.peft``: the config and its refusals, the adapter the workers train (base frozen, head
trainable), and a peft checkpoint written back as a merged model or as the adapter alone,
both serving the same predictions as the adapter they came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ftplat.adapters import build_target_modules, count_parameters, is_adapter_dir
from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.checkpoints.sizes import build_checkpoint_bytes
from ftplat.config.loading import build_sweep_configs, load_sweep_configs
from ftplat.config.peft_config import PeftConfig
from ftplat.config.schema import JobConfig
from ftplat.config.yaml_input import set_dotted
from ftplat.errors import ConfigError, UserError
from ftplat.tasks import build_task
from ftplat.train.modeling import build_model

TEXTS = ["great movie loved it", "awful boring film"]


def peft_job(model_dir: Path, data_dir: Path | None = None, **peft) -> dict:
    return {"model": {"name_or_path": str(model_dir), "peft": {"method": "lora", "r": 4, **peft}},
            "data": {"source": str(data_dir or model_dir), "max_length": 32}}


# --- config ------------------------------------------------------------------------------
def test_defaults_and_method_fields():
    cfg = PeftConfig()
    assert (cfg.method, cfg.r, cfg.lora_alpha, cfg.target_modules, cfg.modules_to_save) == ("lora", 8, 16, None, None)
    with pytest.raises(ValueError, match="target_modules is empty"):
        PeftConfig(target_modules=[])
    assert PeftConfig(target_modules="all-linear").target_modules == "all-linear"


def test_ia3_jobs_validate_again_from_their_dumps_and_refuse_lora_fields_the_user_wrote(tiny_model_dir):
    """An IA3 job's dump (a trial's config, sweep_config.json) validates again: it holds no
    LoRA field, where every IA3 sweep used to be refused for LoRA defaults nobody wrote."""
    job, _ = build_sweep_configs({"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "ia3"}}}, {})
    dumped = job.model_dump(mode="json")
    assert dumped["model"]["peft"] == {"method": "ia3", "target_modules": None, "modules_to_save": None}
    assert JobConfig.model_validate(dumped).model.peft.method == "ia3"
    assert build_sweep_configs(dumped, {})[0] == job  # a recorded sweep_config.json reproduces
    with pytest.raises(ConfigError, match=r"^job config: model.peft.r applies to model.peft.method lora and dora, "
                                          r"not ia3; remove it$"):
        build_sweep_configs({"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "ia3", "r": 4}}}, {})
    with pytest.raises(ConfigError, match=r"search.parameters.model.peft.lora_alpha applies to"):
        build_sweep_configs({"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "ia3"}}},
                            {"parameters": {"model.peft.lora_alpha": {"type": "choice", "values": [8, 16]}}})
    with pytest.raises(ConfigError, match=r"model.peft.use_rslora applies to"):
        build_sweep_configs({"model": {"name_or_path": str(tiny_model_dir),
                                       "peft": {"method": "ia3", "use_rslora": True}}}, {})


def test_a_searched_method_keeps_the_lora_fields_for_its_lora_trials(tiny_model_dir):
    job, space = build_sweep_configs(
        {"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "lora", "r": 16}}},
        {"parameters": {"model.peft.method": {"type": "choice", "values": ["lora", "ia3"]},
                        "model.peft.r": {"type": "choice", "values": [4, 16]}}})
    assert set(space.parameters) == {"model.peft.method", "model.peft.r"}
    ia3_trial = JobConfig.model_validate(set_dotted(job.model_dump(), {"model.peft.method": "ia3", "model.peft.r": 4}))
    assert ia3_trial.model.peft.method == "ia3"
    # An ia3 job whose LoRA trials (a searched method) take the LoRA values the user wrote:
    # its dumps (each trial's config, sweep_config.json) keep them, and r can be searched too.
    job, space = build_sweep_configs(
        {"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "ia3", "r": 16, "lora_alpha": 32}}},
        {"parameters": {"model.peft.method": {"type": "choice", "values": ["ia3", "lora"]},
                        "model.peft.r": {"type": "choice", "values": [4, 16]}}})
    lora_trial = JobConfig.model_validate(set_dotted(job.model_dump(), {"model.peft.method": "lora"}))
    assert (lora_trial.model.peft.r, lora_trial.model.peft.lora_alpha) == (16, 32.0)
    assert build_sweep_configs(job.model_dump(mode="json"), space.model_dump(mode="json"))[0] == job


def test_peft_and_trainable_patterns_refused_together():
    with pytest.raises(ValueError, match="trainable_patterns and peft both choose what trains"):
        JobConfig.model_validate({"model": {"peft": {}, "trainable_patterns": ["classifier"]}})


def test_peft_fields_are_searchable(tmp_path):
    job, space = load_sweep_configs(None, None, [
        "model.peft.method=lora", "search.parameters.model.peft.r={type: choice, values: [4, 8, 16]}",
        "search.parameters.model.peft.lora_alpha={type: uniform, low: 8.0, high: 32.0}"])
    assert job.model.peft.r == 8 and {"model.peft.r", "model.peft.lora_alpha"} < set(space.parameters)
    with pytest.raises(ConfigError, match=r"model.peft is not set in the job config; set it"):
        load_sweep_configs(None, None, ["search.parameters.model.peft.r={type: choice, values: [4, 8]}"])
    with pytest.raises(ConfigError, match=r"parameters.model.peft.r can take 0"):
        load_sweep_configs(None, None, ["model.peft.method=lora",
                                        "search.parameters.model.peft.r={type: choice, values: [0, 8]}"])


def test_zero3_with_peft_is_refused_before_any_work():
    with pytest.raises(ConfigError, match="ZeRO stage 3, which ftplat does not run with model.peft"):
        load_sweep_configs(None, None, ["model.peft.method=lora", "training.deepspeed=zero3"])
    job, _ = load_sweep_configs(None, None, ["model.peft.method=lora", "training.deepspeed=zero2"])
    assert job.training.deepspeed == "zero2"


def test_target_module_defaults_per_architecture():
    assert build_target_modules(PeftConfig(), "bert", []) == (["query", "value"], None)
    assert build_target_modules(PeftConfig(), "llama", []) == (["q_proj", "v_proj"], None)
    assert build_target_modules(PeftConfig(), "longformer", []) == (["query", "value"], None)
    assert build_target_modules(PeftConfig(target_modules=["dense"]), "bert", []) == (["dense"], None)
    targets, feedforward = build_target_modules(PeftConfig(method="ia3"), "bert", [])
    assert set(feedforward) <= set(targets)
    with pytest.raises(UserError, match=r"neither peft nor ftplat has a default for model type 'mystery'.*end in: proj_a, proj_b"):
        build_target_modules(PeftConfig(), "mystery", ["proj_b", "proj_a"])


def test_every_task_names_its_peft_task_type():
    assert build_task("text-classification").peft_task_type == "SEQ_CLS"
    assert build_task("regression").peft_task_type == "SEQ_CLS"
    assert build_task("token-classification").peft_task_type == "TOKEN_CLS"


# --- the model the workers train -----------------------------------------------------------
@pytest.mark.parametrize("method", ["lora", "dora", "ia3"])
def test_adapter_trains_with_the_head_and_the_base_frozen(tiny_model_dir, method):
    peft = {"method": method} if method == "ia3" else {"method": method, "r": 4}
    job = JobConfig.model_validate({"model": {"name_or_path": str(tiny_model_dir), "peft": peft}})
    model = build_model(job)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("classifier" in n for n in trainable)
    assert not any("word_embeddings" in n for n in trainable)
    assert any(("lora_" if method != "ia3" else "ia3_") in n for n in trainable)
    count, total = count_parameters(model)
    assert 0 < count < total / 2


@pytest.mark.parametrize("use_rslora", [False, True])
def test_the_adapter_scales_its_update_as_configured(tiny_model_dir, use_rslora):
    """lora_alpha / r by default; lora_alpha / sqrt(r) with use_rslora, so a searched rank
    need not also change the step size."""
    job = JobConfig.model_validate({"model": {"name_or_path": str(tiny_model_dir), "peft": {
        "method": "lora", "r": 16, "lora_alpha": 8, "use_rslora": use_rslora}}})
    model = build_model(job)
    scalings = {s for m in model.modules() if hasattr(m, "scaling") and isinstance(m.scaling, dict)
                for s in m.scaling.values()}
    assert scalings == {2.0 if use_rslora else 0.5}


def test_trainable_patterns_still_choose_without_peft(tiny_model_dir):
    job = JobConfig.model_validate({"model": {"name_or_path": str(tiny_model_dir), "trainable_patterns": ["classifier"]}})
    model = build_model(job)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {"classifier.weight", "classifier.bias"}


# --- a peft checkpoint as a model folder ----------------------------------------------------
@pytest.fixture(scope="module")
def adapter_checkpoint(tiny_model_dir, tmp_path_factory):
    """An adapter and head saved the way the Trainer saves a peft checkpoint, with non-zero
    LoRA updates (a fresh adapter's are zero, which would hide a merge that drops them)."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("peft-ckpt") / "checkpoint-8"
    job = JobConfig.model_validate(peft_job(tiny_model_dir))
    torch.manual_seed(0)
    model = build_model(job)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.requires_grad:
                param.add_(torch.randn_like(param) * 0.5)
    model.save_pretrained(root)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(root)
    (root / "optimizer.pt").write_bytes(b"x" * 1000)
    (root / "trainer_state.json").write_text("{}")
    model.eval()
    return root, peft_job(tiny_model_dir), model


def save_as_trained(model, tokenizer, ckpt: Path) -> Path:
    """Move every trainable weight (a fresh adapter's update is zero, which would hide a merge
    that drops it), save the model and tokenizer as a checkpoint, and put the model in eval mode."""
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.add_(torch.randn_like(param) * 0.5)
    model.save_pretrained(ckpt)
    tokenizer.save_pretrained(ckpt)
    model.eval()
    return ckpt


def predict_logits(model, model_dir) -> torch.Tensor:
    from transformers import AutoTokenizer

    batch = AutoTokenizer.from_pretrained(model_dir)(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        return model(**batch).logits


def test_merged_export_loads_alone_and_predicts_as_the_adapter(adapter_checkpoint, tmp_path):
    from transformers import AutoModelForSequenceClassification

    ckpt, job, adapted = adapter_checkpoint
    record = run_write_model_dir(str(ckpt), str(tmp_path / "merged"), job)
    assert record["weights"] == "merged" and record["base_model"] == job["model"]["name_or_path"]
    assert record["modules_to_save"] == ["classifier"]  # the new head trained whole (the card says so)
    names = {p.name for p in (tmp_path / "merged").iterdir()}
    assert "model.safetensors" in names and not is_adapter_dir(names) and "optimizer.pt" not in names
    merged = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").eval()
    assert torch.allclose(predict_logits(merged, ckpt), predict_logits(adapted, ckpt), atol=1e-5)


def test_adapter_only_export_serves_through_the_task(adapter_checkpoint, tmp_path):
    ckpt, job, adapted = adapter_checkpoint
    out = tmp_path / "adapter"
    assert run_write_model_dir(str(ckpt), str(out), job, adapter_only=True)["weights"] == "adapter"
    names = {p.name for p in out.iterdir()}
    assert is_adapter_dir(names) and "config.json" in names and "model.safetensors" not in names
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == job["model"]["name_or_path"]
    task = build_task("text-classification")
    served = task.run_predict(task.build_pipeline(str(out)), TEXTS)
    expected = torch.softmax(predict_logits(adapted, ckpt), dim=-1).max(dim=-1).values
    assert [round(p["score"], 4) for p in served] == [round(float(v), 4) for v in expected]


def test_adapter_exports_refuse_what_they_cannot_do(adapter_checkpoint, tiny_model_dir, tmp_path):
    ckpt, job, _ = adapter_checkpoint
    with pytest.raises(UserError, match="has no sweep_config.json naming the base model"):
        run_write_model_dir(str(ckpt), str(tmp_path / "a"), None)
    with pytest.raises(UserError, match="--adapter-only: .* holds whole model weights"):
        run_write_model_dir(str(tiny_model_dir), str(tmp_path / "b"), job, adapter_only=True)
    moved = json.loads((ckpt / "adapter_config.json").read_text())
    gone = tmp_path / "adapter-elsewhere"
    run_write_model_dir(str(ckpt), str(gone), job, adapter_only=True)
    (gone / "adapter_config.json").write_text(json.dumps({**moved, "base_model_name_or_path": "/nowhere/base"}))
    with pytest.raises(UserError, match="base model '/nowhere/base' is not on this machine"):
        build_task("text-classification").build_pipeline(str(gone))


def test_checkpoint_bytes_separate_the_model_from_training_state(adapter_checkpoint):
    ckpt, _, _ = adapter_checkpoint
    sizes = build_checkpoint_bytes(str(ckpt))
    assert sizes["total"] - sizes["model"] >= 1000
    assert sizes["model"] >= (ckpt / "adapter_model.safetensors").stat().st_size


def test_the_winner_lines_say_what_trained_and_what_a_checkpoint_weighs():
    from ftplat.records import SweepSummary
    from ftplat.tune.summary import format_winner_line

    ckpt = {"path": "/s/train-a/checkpoint-4", "exists": True, "step": 4, "epoch": 1.0, "eval_accuracy": 0.8}
    trial = {"trial_id": "a", "status": "TERMINATED", "hyperparameters": {"model.peft.r": 8}, "scores": {"last": 0.8},
             "history": [], "best_checkpoint": ckpt,
             "train_result": {"trainable_parameters": 341_378, "total_parameters": 22_713_602,
                              "checkpoint_bytes": {"total": 4_400_000, "model": 1_500_000},
                              "peak_memory_bytes": 3 * 2**30 // 2}}
    summary = SweepSummary.from_dict({
        "sweep_name": "s", "sweep_path": "/s", "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy", "trials": [trial],
        "winner": {"trial_id": "a", "score": 0.8, "hyperparameters": trial["hyperparameters"], "best_checkpoint": ckpt}})
    assert format_winner_line(summary).splitlines()[-1] == (
        "  trained: 341,378 of 22,713,602 parameters (1.50%); a checkpoint 1.4 MiB of model, 4.2 MiB with "
        "training state; peak worker memory 1.5 GiB")
    del trial["train_result"]
    assert "trained:" not in format_winner_line(SweepSummary.from_dict({**summary.to_dict(), "trials": [trial]}))


def test_the_winner_lines_give_its_pace():
    from ftplat.tune.summary import format_pace_lines

    assert format_pace_lines(None) == [] and format_pace_lines({"steps": 5, "step_ms_median": None}) == []
    assert format_pace_lines({"steps": 2560, "first_10_steps_s": 2.8, "step_ms_median": 45.13,
                              "step_ms_mean": 51.2}) == [
        "  pace: 2,560 steps, the 10th after 2.8 s, then 45.13 ms a step (median; mean 51.2 ms with evaluations "
        "and saves)"]


# --- weights the base checkpoint lacks ----------------------------------------------------------
def test_weights_the_base_checkpoint_lacks_train_and_travel_with_the_adapter(tiny_model_dir, tmp_path, caplog):
    """DeBERTa's classification pooler is not in an encoder checkpoint: loading draws it at
    random. Frozen and left out of the adapter, export (or test scoring, or serving) would draw
    it again, differently, and serve a model that never trained."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DebertaV2Config, DebertaV2Model

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    base = tmp_path / "deberta"
    DebertaV2Model(DebertaV2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=64, pooler_hidden_size=32)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    job = peft_job(base)
    torch.manual_seed(0)
    with caplog.at_level("INFO", logger="ftplat.adapters"):
        model = build_model(JobConfig.model_validate(job))
    assert "pooler.dense" in caplog.text
    pooler = {n: p.requires_grad for n, p in model.named_parameters() if "pooler" in n and "original_module" not in n}
    assert pooler and all(pooler.values())  # peft's trained copy (modules_to_save)
    ckpt = save_as_trained(model, tokenizer, tmp_path / "checkpoint-4")
    torch.manual_seed(1234)  # the base is loaded again with other random draws, as export does
    run_write_model_dir(str(ckpt), str(tmp_path / "merged"), job)
    merged = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").eval()
    assert torch.allclose(predict_logits(merged, ckpt), predict_logits(model, ckpt), atol=1e-5)


def test_a_new_module_holding_a_tied_weight_stays_frozen_with_a_warning(tiny_model_dir, caplog):
    """A masked-LM head missing from a classifier checkpoint holds the decoder tied to the input
    embeddings: a saved copy would untie it (and export would tie it back)."""
    job = JobConfig.model_validate({"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "lora", "r": 4}},
                                    "task": {"type": "masked-lm"}})
    with caplog.at_level("INFO", logger="ftplat.adapters"):
        model = build_model(job)
    assert "cls.predictions initialised at random" in caplog.text and "stays frozen" in caplog.text
    assert not any(p.requires_grad for n, p in model.named_parameters() if "cls.predictions" in n)


def test_a_trained_masked_lm_head_survives_the_merged_export(tmp_path):
    """The README's advice for a head missing from the checkpoint, modules_to_save:
    [cls.predictions]: the merge unties the decoder from the embeddings, yet its bias stayed
    one tensor with predictions.bias in memory, was saved once, and the untied export loaded
    it at random (logits off by 0.44 from the trained model's in a reviewer's run)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tiny_assets import NEGATIVE, NEUTRAL, POSITIVE, write_tiny_headless_bert

    base = write_tiny_headless_bert(tmp_path / "bert", sorted({*NEUTRAL, *POSITIVE, *NEGATIVE}))
    job = {"model": {"name_or_path": str(base), "peft": {"method": "lora", "r": 4,
                                                           "modules_to_save": ["cls.predictions"]}},
           "task": {"type": "masked-lm"}}
    torch.manual_seed(0)
    model = build_model(JobConfig.model_validate(job))
    ckpt = save_as_trained(model, AutoTokenizer.from_pretrained(base), tmp_path / "checkpoint-4")
    run_write_model_dir(str(ckpt), str(tmp_path / "merged"), job)
    merged = AutoModelForMaskedLM.from_pretrained(tmp_path / "merged").eval()
    assert torch.allclose(predict_logits(merged, ckpt), predict_logits(model, ckpt), atol=1e-4)


def test_the_export_card_names_the_winners_searched_adapter_settings(adapter_checkpoint, tmp_path):
    """The sweep's job holds the base value (r 16); the winner trained with r 4, its searched value."""
    import shutil

    from ftplat.checkpoints.export import run_export
    from ftplat.config.loading import load_sweep_configs

    ckpt, job, _ = adapter_checkpoint
    sweep = tmp_path / "sweep"
    shutil.copytree(ckpt, sweep / "train-a" / ckpt.name)
    base_job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={job['model']['name_or_path']}", "model.peft={method: lora, r: 16}",
        "search.parameters={model.peft.r: {type: choice, values: [4, 16]}}"])
    (sweep / "sweep_config.json").write_text(json.dumps({"job": base_job.model_dump(mode="json"),
                                                         "search_space": space.model_dump(mode="json")}))
    best = {"path": "/elsewhere/train-a/" + ckpt.name, "exists": True, "step": 8, "epoch": 1.0, "eval_accuracy": 0.8}
    trial = {"trial_id": "a", "status": "TERMINATED", "hyperparameters": {"model.peft.r": 4}, "scores": {"last": 0.8},
             "history": [], "best_checkpoint": best}
    (sweep / "summary.json").write_text(json.dumps({
        "sweep_name": "sweep", "sweep_path": "/elsewhere", "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy", "trials": [trial],
        "winner": {"trial_id": "a", "score": 0.8, "hyperparameters": trial["hyperparameters"], "best_checkpoint": best}}))
    record = run_export(str(sweep), str(tmp_path / "out"))
    assert record["weights"]["peft"]["r"] == 4
    card = (tmp_path / "out" / "README.md").read_text()
    assert "r 4" in card and "r 16" not in card


def test_wrapping_and_merging_log_no_library_deprecation_warnings(tiny_model_dir, tmp_path):
    """peft reads transformers' deprecated is_gradient_checkpointing in every worker and at export."""
    import warnings

    from ftplat.adapters import build_merged_model

    job = JobConfig.model_validate({"model": {"name_or_path": str(tiny_model_dir), "peft": {"method": "lora", "r": 4}}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = build_model(job)
        model.save_pretrained(tmp_path / "adapter")
        build_merged_model(build_task(job).build_model(job.model), str(tmp_path / "adapter"))
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
