"""The sweep entry point on bad input: exit code 2, one line naming the field, nothing written."""

import subprocess
import sys
from pathlib import Path

import pytest

from ftplat.cli.main import main as ftplat_main
from ftplat.cli.sweep import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["training.learning_rate=-1"], "training.learning_rate: Input should be greater than 0"),
        (["training.lerning_rate=1"], "training.lerning_rate: unknown key"),
        (["search.scope=best"], "scope: Input should be"),
        (["search.num_samples=0"], "num_samples: Input should be greater than or equal to 1"),
        (["resources.max_concurrent_trials=0"], "resources.max_concurrent_trials"),
        (["training.save_total_limit=0"], "training.save_total_limit"),
        (["training.warmup_steps=2.5"], "training.warmup_steps"),
        (["--config", "nope.yaml"], "config file 'nope.yaml' does not exist"),
        (["--model", "./no/such/model"], "model.name_or_path"),
        (["--model", "{tiny}", "--dataset", "./no/such/data"], "data.source"),
        (["--model", "{tiny}", "--dataset", "{data}", "data.text_column=review"], "data.text_column 'review'"),
        (["--resume"], "--resume needs the sweep's name"),
        (["--resume", "--name", "never-ran"], "no sweep 'never-ran'"),
        (["training.deepspeed={ds}/malformed.json"], "malformed.json is not valid JSON: Expecting property name "
                                                     "enclosed in double quotes (line 4, column 1)"),
        (["training.deepspeed={ds}/missing.json"], "missing.json' does not exist"),
        (["training.deepspeed=zero4"], "training.deepspeed: unknown DeepSpeed preset 'zero4'"),
        (["training.deepspeed={ds}/fixed_lr.json"], "the search space varies training.learning_rate but the "
                                                    "DeepSpeed config fixes optimizer.params.lr=0.0001"),
        (["training.deepspeed={ds}/fixed_lr.json", "search.parameters={{training.weight_decay: {{type: uniform, low: 0.0, high: 0.1}}}}"],
         "optimizer.params.lr=0.0001 differs from training.learning_rate=2e-05"),
        (["training.deepspeed=zero3_offload"], "offload_optimizer.device='cpu' offloads GPU memory to CPU RAM"),
        (["training.deepspeed=zero2", "training.bf16=true"], "DeepSpeed mixed precision needs GPU workers"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, expected, tmp_path, capsys, tiny_model_dir, sentiment_data_dir):
    storage = tmp_path / "storage"
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "malformed.json").write_text('{\n  "zero_optimization": {"stage": 2},\n  "gradient_clipping": "auto",\n}\n')
    (ds / "fixed_lr.json").write_text('{"optimizer": {"type": "AdamW", "params": {"lr": 1.0e-4}}}')
    args = [a.format(tiny=tiny_model_dir, data=sentiment_data_dir, ds=ds) for a in args]
    code = main([*args, "--storage", str(storage)])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2
    assert len(errors) == 1 and expected in errors[0]
    assert not any(storage.rglob("*")), "nothing may be written to storage"


def test_unwritable_storage(tmp_path, capsys, tiny_model_dir, sentiment_data_dir):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
                 "--storage", str(blocker / "sub")])
    assert code == 2 and "storage.storage_path" in capsys.readouterr().err


def test_console_script_lists_commands(capsys):
    assert ftplat_main(["--help"]) == 0
    assert "sweep" in capsys.readouterr().out
    assert ftplat_main([]) == 2 and "usage: ftplat" in capsys.readouterr().err


@pytest.mark.parametrize("command, names", [("nope", "'nope' is not an ftplat command; commands: sweep, "),
                                            ("swep", "'swep' is not an ftplat command; did you mean 'sweep'?")])
def test_an_unknown_command_is_named_in_one_line(command, names, capsys):
    """It printed the usage lines without a word of what was wrong."""
    assert ftplat_main([command, "x"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and names in err, err


def test_an_unreachable_hub_is_one_refusal_not_forty_retry_warnings():
    import logging

    from ftplat.cli.sweep import configure_logging

    configure_logging()
    assert logging.getLogger("huggingface_hub.utils._http").getEffectiveLevel() == logging.ERROR


@pytest.mark.parametrize("argv, names", [
    (["export", "a", "b", "--bogus"], "unrecognized arguments: --bogus"),
    (["export", "a", "b", "--private"], "--private needs --push-to-hub"),
    (["predict"], "model_dir"),
    (["checkpoints", "gc", "a", "--bogus"], "unrecognized arguments: --bogus"),
    (["sweeps", "show"], "sweep"),
    (["sweeps", "list", "--bogus"], "unrecognized arguments: --bogus"),
    (["ds-estimate", "--model", "m"], "--num-gpus"),
    (["reproduce"], "the following arguments are required: SWEEP; "),
])
def test_every_command_refuses_a_bad_command_line_in_one_line(argv, names, capsys):
    """Only ``ftplat sweep`` and ``reproduce`` did; the others printed argparse's usage lines
    first, and reproduce named its optional key=value overrides as required."""
    with pytest.raises(SystemExit) as exit_:
        ftplat_main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and names in err and "--help' for the options" in err


def test_version(capsys):
    import ftplat

    capsys.readouterr()
    assert ftplat_main(["--version"]) == 0
    assert capsys.readouterr().out == f"ftplat {ftplat.__version__}\n"


def test_job_script_help_runs_without_ray():
    out = subprocess.run([sys.executable, "jobs/imdb_sweep.py", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--search-space" in out.stdout and "key=value" in out.stdout


def test_paths_inside_a_job_working_dir_copy_are_flagged():
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.preflight import build_ephemeral_path_warnings

    cwd = "/tmp/ray/session_x/runtime_resources/working_dir_files/_ray_pkg_abc"
    job, _ = load_sweep_configs(None, None, [f"storage.storage_path={cwd}/out",
                                             f"tracking.tracking_uri=sqlite:///{cwd}/mlflow.db"])
    warnings = build_ephemeral_path_warnings(job, cwd)
    assert len(warnings) == 2 and "storage.storage_path" in warnings[0] and "tracking.tracking_uri" in warnings[1]
    assert build_ephemeral_path_warnings(job, "/home/me/project") == []


def test_unreachable_mlflow_is_reported_before_anything_runs(tmp_path, capsys, tiny_model_dir, sentiment_data_dir):
    code = main(["--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir), "--storage",
                 str(tmp_path / "s"), "tracking.tracking_uri=http://127.0.0.1:9"])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(errors) == 1 and "tracking.tracking_uri 'http://127.0.0.1:9' is not usable" in errors[0]
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").rglob("*"))


@pytest.mark.parametrize("key, secret", [("hub_token", True), ("hf.hub_token", True), ("AWS_SECRET_ACCESS_KEY", True),
                                         ("db_password", True), ("api_key", True), ("hf.average_tokens_across_devices", False),
                                         ("tokenizer_name", False), ("training.learning_rate", False)])
def test_secret_keys_are_masked(key, secret):
    from ftplat.tracking.runs import redact

    assert (redact(key, "value") == "***") is secret
    assert redact("storage", "s3://AKIA:hunter2@bucket/x") == "s3://***@bucket/x"


def test_scoped_tracking_uri_leaves_the_environment_as_it_was(monkeypatch):
    import os

    import mlflow

    from ftplat.tracking.report import scoped_tracking_uri

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/before.db")
    with scoped_tracking_uri("http://127.0.0.1:1"):
        assert mlflow.get_tracking_uri() == "http://127.0.0.1:1"
    assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:////tmp/before.db"
    assert mlflow.get_tracking_uri() == "sqlite:////tmp/before.db"
