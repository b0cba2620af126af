"""The command-line overrides of the tiny sweeps the integration tests run (tiny BERT, synthetic
sentiment data): one base, each test adds or replaces keys (a later override wins)."""

from __future__ import annotations


def build_tiny_overrides(model_dir, data_dir, storage, name, *extra):
    return [
        f"model.name_or_path={model_dir}",
        f"data.source={data_dir}",
        f"storage.storage_path={storage}",
        f"storage.sweep_name={name}",
        "data.max_length=48",
        # The recipe's protocol (select on test): these tests were written for it; the task
        # tests (test_tasks.py) run the validation protocol.
        "data.eval_split=test",
        "training.num_train_epochs=3.0",
        "training.logging_steps=20",
        "training.per_device_eval_batch_size=64",
        "resources.max_concurrent_trials=2",
        "search.num_samples=4",
        "search.seed=7",
        "search.parameters.training.learning_rate={type: loguniform, low: 3.0e-4, high: 2.0e-2}",
        "search.parameters.training.warmup_steps={type: uniform, low: 0.0, high: 0.2}",
        "search.parameters.training.weight_decay={type: uniform, low: 0.0, high: 0.1}",
        *extra,
    ]
