"""``ftplat sweep`` refusing what only the running environment can tell: storage it cannot
reach, a tracking server that is down, a trial this machine cannot run, a ``--resume`` with
nothing to resume, a bad command line, and data problems that used to leave an empty storage
folder behind. Every refusal exits 2 with one ``error:`` line naming the field and the fix,
starts no Ray session and leaves the storage root as it was. An unexpected failure exits 1
with one line naming the log file that holds its traceback.

The subprocess cases run at once in one module fixture (a few at a time); each test then
reads its recorded outcome.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_refusals import Case, check_refused, run_battery
from tiny_assets import build_sentiment_rows

from ftplat.config.schema import ResourcesConfig
from ftplat.errors import UserError

SECRET = "hunter2-s3cr3t"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
#: An S3 endpoint nothing listens on, and no credentials from anywhere: no real network is tried.
NO_S3 = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
         "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "{tmp}/none",
         "AWS_SHARED_CREDENTIALS_FILE": "{tmp}/none"}
#: Stands for a storage folder of the case's own, which does not exist yet: a refusal must
#: not create it. Its own, because the cases run at once under one storage root (which holds
#: earlier sweeps), and one case's folder would be in the others' "before".
NEW_ROOT = "{storage}/new-root"
#: A small real model and data set, and no MLflow unless the case is about it.
RUN = ["--model", "{model}", "--dataset", "{data}", "--storage", NEW_ROOT, "tracking.enabled=false"]


def case(name: str, extra: list[str], names: str, env: dict[str, str] | None = None, base: list[str] = RUN) -> Case:
    args = [arg.replace(NEW_ROOT, "{storage}/" + name) for arg in [*base, *extra]]
    return Case(name, args, names, env={**OFFLINE, **(env or {})})


def without(flag: str) -> list[str]:
    """``RUN`` less one option and its value (the case gives its own)."""
    i = RUN.index(flag)
    return RUN[:i] + RUN[i + 2:]


def sweeps_case(name: str, extra: list[str], names: str) -> Case:
    """A case about the earlier sweeps in the storage root."""
    return case(name, ["--storage", "{storage}", *extra], names, base=without("--storage"))


CASES = [
    # storage: reachability and credentials, checked without writing
    case("s3-bucket-unreachable", ["--storage", "s3://ftplat-no-such-bucket/sweeps"], "storage.storage_path",
         env=NO_S3, base=without("--storage")),
    case("s3-credentials-in-uri", ["--storage", f"s3://AKIAFTPLATEXAMPLE:{SECRET}@ftplat-no-such-bucket/sweeps"],
         "storage.storage_path 's3://***@ftplat-no-such-bucket/sweeps' is not reachable", env=NO_S3,
         base=without("--storage")),
    case("storage-under-a-file", ["--storage", "{storage}/a-file/sweeps"], "storage.storage_path",
         base=without("--storage")),
    # tracking
    case("tracking-server-down", ["tracking.enabled=true", f"tracking.tracking_uri=http://ftplat:{SECRET}@127.0.0.1:9"],
         "tracking.tracking_uri 'http://***@127.0.0.1:9' is not usable"),
    # A local store is not created before every check has passed (MLflow creates it when
    # opened, and logged two lines doing so), nor under a file.
    case("tracking-store-left-uncreated", ["tracking.enabled=true",
                                           "tracking.tracking_uri=sqlite:///{storage}/new-store/mlflow.db",
                                           "data.text_column=review"], "data.text_column 'review' is not a column"),
    case("tracking-store-under-a-file", ["tracking.enabled=true",
                                         "tracking.tracking_uri=sqlite:///{storage}/a-file/mlflow.db"],
         "tracking.tracking_uri 'sqlite:///"),
    # resources against this machine
    case("more-workers-than-cpus", ["resources.num_workers=10000"],
         "resources.num_workers x resources.cpus_per_worker: a trial's 10000 workers"),
    case("workers-wider-than-cpus", ["resources.cpus_per_worker=10000"], "resources.cpus_per_worker"),
    case("gpu-without-gpus", ["resources.use_gpu=true", "resources.gpus_per_worker={gpus_plus_one}"],
         "resources.use_gpu: a trial's 1 workers need"),
    case("fp16-without-gpus", ["resources.use_gpu=true", "resources.gpus_per_worker={gpus_plus_one}",
                               "training.fp16=true"], "training.fp16=false"),
    case("local-cpus-below-the-trial", ["resources.local_num_cpus=1", "resources.num_workers=2"],
         "resources.local_num_cpus: a trial needs 2.25 CPUs"),
    case("fp16-on-cpu-workers", ["training.fp16=true"], "training.fp16"),
    # --resume and the sweep's name
    sweeps_case("resume-no-such-sweep", ["--resume", "--name", "never-ran"], "--resume: no sweep 'never-ran'"),
    sweeps_case("resume-only-sweep-config", ["--resume", "--name", "only-config"], "--resume: sweep 'only-config'"),
    sweeps_case("resume-before-first-trial", ["--resume", "--name", "tuner-only"], "--resume: sweep 'tuner-only'"),
    # A full disk tore Tune's state: Tune would start afresh over it, with trials of no values
    sweeps_case("resume-torn-state", ["--resume", "--name", "torn"], "--resume: sweep 'torn'"),
    # Its data changed under the same source (a file rewritten): the winner would be chosen
    # across two validation sets
    sweeps_case("resume-on-other-data", ["--resume", "--name", "other-data"],
                "--resume: sweep 'other-data' ran on other data: the tokenized eval (3 -> "),
    case("resume-without-name", ["--resume"], "--resume needs the sweep's name"),
    sweeps_case("name-taken", ["--name", "only-config"], "storage.sweep_name 'only-config' already exists"),
    sweeps_case("name-of-a-finished-sweep", ["--name", "finished"], "storage.sweep_name 'finished' already exists"),
    # the command line: overrides anywhere, argparse's errors in one line
    case("override-between-options", ["--model", "{model}", "data.max_length=4", "--dataset", "{data}",
                                      "tracking.enabled=false", "--storage", NEW_ROOT, "--name", "late"],
         "data.max_length: Input should be greater than or equal to 8", base=[]),
    case("override-after-options", ["--storage", NEW_ROOT, "resources.num_workers=10000", "--name", "late"],
         "resources.num_workers", base=without("--storage")),
    case("unknown-option", ["--bogus"], "unrecognized arguments: --bogus"),
    case("option-without-value", ["--name"], "argument --name: expected one argument"),
    # data problems, found before the storage root is touched
    case("missing-split", ["--dataset", "{tmp}/train_only", "data.eval_split=test"], "no files for split(s) ['test']",
         base=without("--dataset")),
    case("unknown-eval-split", ["data.eval_split=dev"], "no files for split(s) ['dev']"),
    case("labels-out-of-range", ["--dataset", "{tmp}/label_7"], "has label 7 outside 0..1", base=without("--dataset")),
    case("missing-text-column", ["data.text_column=review"], "data.text_column 'review' is not a column"),
]

#: Cases whose one line must say more than ``Case.names`` (the fix, or what is missing).
ALSO = {
    "s3-bucket-unreachable": ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID"],
    "storage-under-a-file": ["a-file' is a file, not a folder"],
    "more-workers-than-cpus": ["set resources.local_num_cpus to oversubscribe"],
    "local-cpus-below-the-trial": ["raise resources.local_num_cpus to 3"],
    "fp16-without-gpus": ["resources.use_gpu"],
    "resume-only-sweep-config": ["has no tuner.pkl", "without --resume under another --name"],
    "resume-before-first-trial": ["has no experiment_state-"],
    "resume-torn-state": ["experiment_state-2026-01-01_00-00-00.json cannot be read (JSONDecodeError",
                          "driver_artifacts/"],
    "tracking-server-down": ["tracking.enabled=false"],
    "name-taken": ["pass --resume to continue it"],
    # --resume would be refused: a finished sweep has nothing to continue
    "name-of-a-finished-sweep": ["it has finished: choose another storage.sweep_name"],
    "tracking-store-under-a-file": ["a-file/mlflow.db' cannot be created", "a-file' is not a folder"],
}


def read_gpu_count() -> int:
    """NVIDIA GPUs of this machine, without importing torch (the driver lists one folder each)."""
    return len(list(Path("/proc/driver/nvidia/gpus").glob("*")))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, tiny_model_dir, sentiment_data_dir):
    tmp = tmp_path_factory.mktemp("refusals-runtime")
    (tmp / "train_only").mkdir()
    shutil.copy(sentiment_data_dir / "train.parquet", tmp / "train_only" / "train.parquet")
    rows = build_sentiment_rows(40, seed=11)
    (tmp / "label_7").mkdir()
    pq.write_table(pa.table({**rows, "label": [*rows["label"][:-1], 7]}), tmp / "label_7" / "train.parquet")
    pq.write_table(pa.table(rows), tmp / "label_7" / "test.parquet")
    # The storage root: an earlier sweep that stopped before Tune wrote anything, one that
    # stopped before its first trial, and a file where a folder is asked for.
    storage = tmp / "storage"
    (storage / "only-config").mkdir(parents=True)
    (storage / "only-config" / "sweep_config.json").write_text("{}")
    (storage / "tuner-only").mkdir()
    (storage / "tuner-only" / "sweep_config.json").write_text("{}")
    (storage / "tuner-only" / "tuner.pkl").write_bytes(b"")
    (storage / "torn").mkdir()
    (storage / "torn" / "sweep_config.json").write_text("{}")
    (storage / "torn" / "tuner.pkl").write_bytes(b"")
    (storage / "torn" / "experiment_state-2026-01-01_00-00-00.json").write_text('{"trial_data": [["{\\"trial_id')
    (storage / "a-file").write_text("not a folder")
    # A sweep stopped after Tune saved its state, started on a smaller eval split than the
    # data now holds (the job it recorded is the one the case gives, so only the data differ).
    from ftplat.config.loading import load_sweep_configs

    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}", f"storage.storage_path={storage}",
        "tracking.enabled=false", "storage.sweep_name=other-data"])
    (storage / "other-data").mkdir()
    (storage / "other-data" / "sweep_config.json").write_text(json.dumps({
        "job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json"),
        "data_fingerprints": {"eval": {"rows": 3, "blake2b": "0" * 32}}}))
    (storage / "other-data" / "tuner.pkl").write_bytes(b"")
    (storage / "other-data" / "experiment_state-2026-01-01_00-00-00.json").write_text('{"trial_data": []}')
    (storage / "finished").mkdir()
    (storage / "finished" / "sweep_config.json").write_text("{}")
    (storage / "finished" / "summary.json").write_text(json.dumps({
        "sweep_name": "finished", "sweep_path": str(storage / "finished"), "scope": "last",
        "objective": {"metric": "eval_accuracy", "mode": "max"}, "metric_for_best_model": "eval_accuracy",
        "trials": [{"trial_id": "a", "status": "TERMINATED", "hyperparameters": {}, "scores": {}, "history": []}]}))
    fill = {"storage": str(storage), "model": str(tiny_model_dir), "data": str(sentiment_data_dir), "tmp": str(tmp),
            "gpus_plus_one": str(read_gpu_count() + 1)}
    return run_battery(CASES, storage=storage, fill=fill, workers=3)


def test_the_battery_is_wide():
    assert len(CASES) >= 20 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("bad", CASES, ids=lambda c: c.name)
def test_refused_before_any_work(outcomes, bad):
    check_refused(outcomes[bad.name], bad)
    line = outcomes[bad.name].stderr_lines[0]
    assert SECRET not in line
    for text in ALSO.get(bad.name, []):
        assert text in line, f"{bad.name}: {line!r} lacks {text!r}"


def test_an_unexpected_failure_exits_1_with_one_line_naming_its_log(monkeypatch, capsys, tmp_path):
    import tempfile

    from ftplat.cli.sweep import main
    from ftplat.tune import sweep

    def fail(job, space, resume):
        raise RuntimeError(f"lost the node at http://ftplat:{SECRET}@10.0.0.9:6379")

    monkeypatch.setattr(sweep, "run_sweep", fail)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["--storage", str(tmp_path / "storage")]) == 1
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: the sweep failed: RuntimeError: lost the node at http://***@10.0.0.9")
    log = Path(lines[0].rsplit("traceback in ", 1)[1])
    assert log.parent == tmp_path / "ftplat-logs" and log.is_file()
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in fail" in text and "RuntimeError: lost the node" in text
    assert SECRET not in text and SECRET not in lines[0]


def test_a_wrapped_failure_names_its_cause_in_the_one_line(monkeypatch, capsys, tmp_path):
    """A full disk reached the user as optuna's StorageInternalError ("invalid data in the
    commit") and a TuneError whose first line is "Traceback ...": the cause was in the log only."""
    import sqlite3
    import tempfile

    from ftplat.cli.sweep import main
    from ftplat.tune import sweep

    class TuneError(Exception):
        pass

    def full_disk(job, space, resume):
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as exc:
            raise RuntimeError("An exception is raised during the commit. This typically happens due to invalid "
                               "data in the commit") from exc

    def tune_error(job, space, resume):
        raise TuneError("Traceback (most recent call last):\n  File \"x.py\", line 3, in save\n    f.write(b)\n"
                        "OSError: [Errno 28] No space left on device")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for fail, expected in ((full_disk, "(caused by OperationalError: database or disk is full)"),
                           (tune_error, "the sweep failed: TuneError: OSError: [Errno 28] No space left on device;")):
        monkeypatch.setattr(sweep, "run_sweep", fail)
        assert main(["--storage", str(tmp_path / "storage")]) == 1
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(lines) == 1 and expected in lines[0], lines


def test_overrides_are_read_anywhere_on_the_command_line():
    from ftplat.cli.sweep import build_overrides, parse_sweep_args

    args = parse_sweep_args(["data.max_length=32", "--storage", "/s", "training.seed=3", "--name", "n",
                             "search.seed=1"])
    assert (args.storage, args.name) == ("/s", "n")
    assert build_overrides(args) == ["storage.storage_path=/s", "storage.sweep_name=n", "data.max_length=32",
                                     "training.seed=3", "search.seed=1"]


@pytest.mark.parametrize("resources, cpus, gpus, refusal", [
    ({"num_workers": 3}, 2, 0, r"resources\.num_workers x resources\.cpus_per_worker: a trial's 3 workers x 1 "
                               r"CPUs need 3 CPUs but this machine has 2; .* set resources\.local_num_cpus to "
                               r"oversubscribe"),
    ({"num_workers": 1, "cpus_per_worker": 2.5}, 2, 0, r"1 workers x 2\.5 CPUs need 2\.5 CPUs"),
    ({"local_num_cpus": 2, "num_workers": 2}, 8, 0, r"resources\.local_num_cpus: a trial needs 2\.25 CPUs .* the "
                                                    r"local cluster gets 2, .* raise resources\.local_num_cpus to 3"),
    ({"use_gpu": True}, 4, 0, r"resources\.use_gpu: a trial's 1 workers need 1 GPUs .* this machine has 0; set "
                              r"resources\.use_gpu=false,"),
    ({"use_gpu": True, "num_workers": 2}, 4, 1, r"need 2 GPUs .* this machine has 1"),
])
def test_a_trial_this_machine_cannot_run_is_refused(resources, cpus, gpus, refusal):
    from ftplat.runtime import check_trial_fits_machine

    with pytest.raises(UserError, match=refusal):
        check_trial_fits_machine(ResourcesConfig(**resources), cpus=cpus, gpus=gpus)


def test_fp16_without_gpus_names_training_fp16():
    from ftplat.runtime import check_trial_fits_machine, check_trial_fits_nodes

    res = ResourcesConfig(use_gpu=True)
    with pytest.raises(UserError, match=r"training\.fp16=false \(float16 needs a GPU\)"):
        check_trial_fits_machine(res, cpus=4, gpus=0, fp16=True)
    with pytest.raises(UserError, match=r"training\.fp16=false \(float16 needs a GPU\)"):
        check_trial_fits_nodes(res, [{"CPU": 8.0}], fp16=True)


@pytest.mark.parametrize("resources, cpus, gpus, warned", [
    ({"num_workers": 2}, 2, 0, False),  # the workers fill the machine; the driver only waits
    ({"num_workers": 2, "cpus_per_worker": 0.5}, 1, 0, False),
    ({"use_gpu": True, "num_workers": 2, "gpus_per_worker": 0.5}, 2, 1, False),
    ({"local_num_cpus": 12, "num_workers": 4, "cpus_per_worker": 2}, 2, 0, True),  # oversubscribed on purpose
    ({"local_num_cpus": 3, "num_workers": 2}, 2, 0, False),
])
def test_a_trial_this_machine_can_run_passes(resources, cpus, gpus, warned):
    from ftplat.runtime import check_trial_fits_machine

    warnings = check_trial_fits_machine(ResourcesConfig(**resources), cpus=cpus, gpus=gpus)
    assert len(warnings) == int(warned)
    if warned:
        assert warnings[0].startswith("resources.local_num_cpus=12: a trial's workers use 8 CPUs on a machine with 2")


def test_the_machine_cpus_are_those_this_process_may_use():
    from ftplat.environment import read_machine_cpus
    from ftplat.runtime import build_local_num_cpus

    cpus = read_machine_cpus()
    assert 1 <= cpus <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert cpus <= len(os.sched_getaffinity(0))
    assert build_local_num_cpus(ResourcesConfig()) == max(cpus, 2)


def test_storage_is_checked_without_writing(tmp_path):
    from ftplat.storage import check_storage_reachable

    check_storage_reachable(str(tmp_path / "new" / "deeper"))
    assert not any(tmp_path.iterdir())
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"storage\.storage_path '.*/file/sweeps': '.*/file' is a file, not a folder"):
        check_storage_reachable(str(tmp_path / "file" / "sweeps"))
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(UserError, match="no permission to write"):
            check_storage_reachable(str(locked / "sweeps"))


def test_resume_needs_the_state_tune_restores_from(tmp_path):
    from ftplat.ray_internals import read_missing_tune_state

    assert read_missing_tune_state(str(tmp_path)) == "tuner.pkl"
    (tmp_path / "tuner.pkl").write_bytes(b"")
    assert read_missing_tune_state(str(tmp_path)).startswith("experiment_state-")
    (tmp_path / "experiment_state-2026-01-01_00-00-00.json").write_text("{}")
    assert read_missing_tune_state(str(tmp_path)) is None


def test_an_interrupted_sweep_is_not_closed_as_a_finished_one(monkeypatch, capsys, tmp_path):
    """On Ctrl-C Tune saves its state and returns from fit() as if done: the sweep must not go on
    to score the test split, prune checkpoints or register a winner, and says how to continue."""
    from ray.tune.experiment import Trial

    from ftplat.cli.sweep import main
    from ftplat.errors import SweepInterrupted
    from ftplat.tune import sweep
    from ftplat.tune.console import build_resume_args, check_sweep_ended

    def trial(tid, status):
        t = Trial("fn", trial_id=tid, stub=True)
        t.set_status(status)
        return t

    storage = str(tmp_path / "storage")
    check_sweep_ended([trial("a", Trial.TERMINATED), trial("b", Trial.ERROR)], "s", 2, storage)  # ended: no error
    with pytest.raises(SweepInterrupted, match=r"sweep s was interrupted with 2 trial\(s\) not ended \(c, d\).*"
                                               r"--resume --name s"):
        check_sweep_ended([trial("a", Trial.TERMINATED), trial("c", Trial.RUNNING), trial("d", Trial.PENDING)], "s",
                          3, storage)
    # Stopped between two trials: every trial made so far ended, and the sweep closed as
    # finished (test score, registration, a summary that --resume refuses).
    with pytest.raises(SweepInterrupted, match=r"^sweep s was interrupted with 1 of its 2 trials not started; its "
                                               r"state is saved: continue it with --resume --name s"):
        check_sweep_ended([trial("a", Trial.TERMINATED)], "s", 2, storage)
    with pytest.raises(SweepInterrupted, match=r"with 1 trial\(s\) not ended \(c\) and 2 of its 4 trials not "):
        check_sweep_ended([trial("a", Trial.TERMINATED), trial("c", Trial.RUNNING)], "s", 4, storage)

    def interrupted(job, space, resume):
        check_sweep_ended([trial("c", Trial.RUNNING)], "s", 1, job.storage.storage_path)

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    monkeypatch.chdir(tmp_path)
    assert main(["--storage", "./storage"]) == 130
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    # The command that continues it works from any directory: the storage as resolved here.
    assert lines == ["error: sweep s was interrupted with 1 trial(s) not ended (c); its state is saved: continue it "
                     f"with --resume --name s --storage {storage} (no test score, final retention or registered "
                     "model yet)"]
    assert build_resume_args("a b", "s3://key:secret@bucket/x") == "--resume --name 'a b' --storage 's3://***@bucket/x'"


def test_ctrl_c_after_the_trials_reaches_the_sweep_again(monkeypatch):
    """Tune's Ctrl-C handler stayed installed after fit: a Ctrl-C during the test score or the
    registration printed Tune's "Stop signal received" and was ignored."""
    import signal

    from ftplat.tune.sweep import run_fit

    def tune_handler(signum, frame):
        pass

    class Tuner:
        def fit(self):
            signal.signal(signal.SIGINT, tune_handler)
            return "grid"

    before = signal.getsignal(signal.SIGINT)
    assert run_fit(Tuner()) == "grid"
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_before_the_sweep_started_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    from ftplat.cli.sweep import main
    from ftplat.tune import sweep

    def interrupted(job, space, resume):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    assert main(["--storage", str(tmp_path / "storage")]) == 130
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert lines == ["error: interrupted (Ctrl-C) before the sweep started; nothing was written to storage: run it "
                     "again"]


def test_sigterm_during_a_sweep_is_handled_as_ctrl_c():
    """kill / ray job stop / a scheduler's preemption: Ray's handler aborted the driver with a
    native stack dump; as Ctrl-C, Tune saves its state and the sweep ends with the --resume line."""
    import os
    import signal
    import time

    from ftplat.tune.console import sigterm_as_ctrl_c

    seen = []
    before_int = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    before_term = signal.getsignal(signal.SIGTERM)
    try:
        with sigterm_as_ctrl_c():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # the handler runs between bytecodes
        assert seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGTERM) is before_term
    finally:
        signal.signal(signal.SIGINT, before_int)
