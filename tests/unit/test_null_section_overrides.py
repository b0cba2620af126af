"""A section that is null takes a ``key=value`` override of one of its keys as an empty one
would: every recorded job without an adapter has ``model.peft: null``, and ``ftplat
reproduce`` applies its overrides to that record."""

from ftplat.config.loading import apply_overrides, load_sweep_configs
from ftplat.records import TrialRecord
from ftplat.tune.reproduce import build_reproduce_configs


def test_a_key_under_a_null_section_makes_the_section():
    job, _ = load_sweep_configs(None, None, ["model.peft=null", "model.peft.r=4"])
    assert job.model.peft is not None and (job.model.peft.method, job.model.peft.r) == ("lora", 4)
    assert apply_overrides({"a": None}, ["a.b=1"]) == {"a": {"b": 1}}


def test_reproduce_overrides_reach_an_adapter_the_sweep_did_not_have():
    job, space = load_sweep_configs(None, None, [])
    recorded = {"job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json")}
    assert recorded["job"]["model"]["peft"] is None
    values = {"training.learning_rate": 3.0e-5, "training.warmup_steps": 0.05, "training.weight_decay": 0.01}
    trial = TrialRecord(trial_id="t1", status="TERMINATED", hyperparameters=values, history=[{"eval_accuracy": 0.5}])
    again, _ = build_reproduce_configs(recorded, trial, sweep_name="r", overrides=["model.peft.r=16"])
    assert again.model.peft.r == 16
