"""The benchmark scripts' argument parsing and result aggregation (no Ray, no training;
no benchmark number is asserted here)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hpo = _load("hpo")
scaling = _load("scaling")


def _piece(method, seed, accs):
    curve = hpo.build_curve([{"accuracy": x} for x in accs])
    return {"method": method, "seed": seed, "curve": curve, "best_accuracy": curve[-1],
            "trial_epochs": len(curve), "wall_s": 1.0}


def test_hpo_arguments():
    a = hpo.build_parser().parse_args(["--method", "ftplat_optuna_asha", "--seed", "2"])
    assert (a.method, a.seed, a.trials, a.epochs) == ("ftplat_optuna_asha", 2, 6, 3)
    # The sweep starts its own cluster inside its wall unless told the cluster is up already.
    assert not a.warm_cluster
    assert hpo.build_parser().parse_args(["--method", "ftplat_random", "--warm-cluster"]).warm_cluster
    with pytest.raises(SystemExit):
        hpo.build_parser().parse_args(["--method", "grid"])
    with pytest.raises(SystemExit):
        hpo.build_parser().parse_args(["--full", "--aggregate"])
    ov = hpo.build_overrides(a, "ftplat_random", 1, "/tmp/s", "/tmp/d")
    assert "search.algorithm=random" in ov and "search.scheduler={type: fifo}" in ov and "search.seed=1" in ov


def test_hpo_packs_concurrent_trials_on_the_same_cores(capsys):
    a = hpo.build_parser().parse_args(["--method", "ftplat_random", "--concurrent", "2"])
    ov = hpo.build_overrides(a, "ftplat_random", 0, "/tmp/s", "/tmp/d")
    assert "resources.cpus_per_worker=1" in ov and "resources.max_concurrent_trials=2" in ov
    with pytest.raises(SystemExit):
        hpo.main(["--method", "ftplat_random", "--concurrent", "3"])
    assert "--concurrent must divide --threads (2), got 3" in capsys.readouterr().err


def test_hpo_overrides_validate():
    from ftplat.config.loading import load_sweep_configs

    a = hpo.build_parser().parse_args(["--method", "ftplat_optuna_asha"])
    job, space = load_sweep_configs(None, None, hpo.build_overrides(a, "ftplat_optuna_asha", 0, "/tmp/s", "/tmp/d"))
    assert space.scheduler.type == "asha" and space.algorithm == "optuna" and space.num_samples == 6
    assert job.data.eval_split == "validation" and job.tracking.enabled is False


def test_hpo_curve_and_goal():
    assert hpo.build_curve([{"accuracy": 0.5}, {"accuracy": None}, {"accuracy": 0.7}, {"accuracy": 0.6}]) == [
        0.5, 0.5, 0.7, 0.7]
    pieces = [_piece("ftplat_random", 0, [0.5, 0.6, 0.7, 0.7]), _piece("ftplat_random", 1, [0.5, 0.5, 0.5, 0.8]),
              _piece("ftplat_optuna_asha", 0, [0.75, 0.6]), _piece("ftplat_optuna_asha", 1, [0.5, 0.5, 0.5])]
    agg = hpo.aggregate(pieces)
    r = agg["methods"]["ftplat_random"]
    assert r["best_accuracy_mean"] == pytest.approx(0.75) and r["trial_epochs_mean"] == 4
    # The shorter seed's curve is carried forward at its best.
    assert agg["methods"]["ftplat_optuna_asha"]["mean_curve"] == pytest.approx([0.625, 0.625, 0.625])
    g = agg["goal"]
    assert g["half_budget"] == 2 and g["asha_trial_epochs_to_reach_mean_curve"] is None
    assert g["met_on_mean_curves"] is False
    assert g["per_seed"][0]["asha_trial_epochs_to_reach"] == 1 and g["met_per_seed"] == {0: True, 1: False}


def test_scaling_arguments_and_aggregate():
    a = scaling.build_parser().parse_args(["--workers", "2"])
    ov = scaling.build_overrides(a, 2, "/tmp/s", "/tmp/d")
    assert "training.per_device_train_batch_size=8" in ov and "resources.cpus_per_worker=1" in ov
    a.global_batch = 15
    with pytest.raises(ValueError, match="divide"):
        scaling.build_overrides(a, 2, "/tmp/s", "/tmp/d")
    keys = dict(train_runtime_s=10.0, trial_driver_wall_s=40.0, sweep_wall_s=50.0, global_step=16, eval_accuracy=0.6)
    agg = scaling.aggregate([
        {"workers": 1, "train_samples_per_s": 10.0, "machine": {"cpus": 2, "load_avg_at_start": [2.4, 2, 2]},
         "load_avg_at_end": [3.1, 2, 2], **keys},
        {"workers": 2, "train_samples_per_s": 8.0, "machine": {"cpus": 2, "load_avg_at_start": [1.9, 2, 2]},
         "load_avg_at_end": [2.0, 2, 2], **keys}])
    assert agg["speedup_samples_per_s"] == pytest.approx(0.8) and agg["trial_wall_ratio_2_over_1"] == 1.0
    assert (agg["cpus"], agg["load_avg_min"], agg["load_avg_max"]) == (2, 1.9, 3.1)


def test_accuracy_overrides_validate():
    from ftplat.config.loading import load_sweep_configs

    accuracy = _load("accuracy")
    a = accuracy.build_parser().parse_args(["--first-point", "1e-4,0.05,0.02"])
    job, space = load_sweep_configs(None, None, accuracy.build_overrides(a, "/tmp/s", "/tmp/d"))
    assert space.points_to_evaluate == [{"training.learning_rate": pytest.approx(1e-4),
                                         "training.warmup_steps": pytest.approx(0.05),
                                         "training.weight_decay": pytest.approx(0.02)}]
    # The product's validation protocol selects (2,000 reviews held out of train) and scores test.
    assert job.data.eval_split is None and job.data.validation.holdout == 2000
    assert job.data.test_split == "test" and job.data.test_size == 2000 and job.data.train_size == 1000


def test_hpo_goal_falls_back_to_in_process_random_search():
    agg = hpo.aggregate([_piece("hf_random", 0, [0.5, 0.6, 0.7, 0.7]), _piece("ftplat_optuna_asha", 0, [0.7, 0.6])])
    g = agg["goal"]
    assert g["random_reference"] == "hf_random" and g["asha_trial_epochs_to_reach_mean_curve"] == 1
    assert g["met_on_mean_curves"] is True and g["met_per_seed"] == {0: True}


def test_hpo_grace2_variant_has_its_own_scheduler_and_goal():
    from ftplat.config.loading import load_sweep_configs

    a = hpo.build_parser().parse_args(["--method", "ftplat_optuna_asha_grace2"])
    _, space = load_sweep_configs(None, None, hpo.build_overrides(a, "ftplat_optuna_asha_grace2", 0, "/tmp/s", "/tmp/d"))
    assert space.scheduler.type == "asha" and space.scheduler.grace_period == 2
    agg = hpo.aggregate([_piece("ftplat_random", 0, [0.5, 0.6, 0.7, 0.7]),
                         _piece("ftplat_optuna_asha_grace2", 0, [0.5, 0.7, 0.6])])
    g2 = agg["goal_by_method"]["ftplat_optuna_asha_grace2"]
    assert g2["asha_trial_epochs_to_reach_mean_curve"] == 2 and g2["met_per_seed"] == {0: True}
    assert "per_seed" not in agg["goal"]  # no grace-1 pieces: only the statement


def test_lora_vs_full_report_takes_medians_of_what_trials_recorded(tmp_path):
    from ftplat.records import Objective, SweepSummary, TrialRecord, Winner

    bench = _load("lora_vs_full")
    runs = []
    for i, (speed, total) in enumerate([(10.0, 300), (14.0, 500), (12.0, 400)]):
        run = tmp_path / f"train-{i}"
        (run / "checkpoint-1").mkdir(parents=True)
        (run / "checkpoint-1" / "adapter_model.safetensors").write_bytes(b"x" * total)
        runs.append(TrialRecord(trial_id=f"t{i}", status="TERMINATED", scores={"last": 0.5 + i / 10},
                                train_run_path=str(run),
                                train_result={"train_samples_per_second": speed, "trainable_fraction": 0.01,
                                              "checkpoint_bytes": {"total": total, "model": total // 3},
                                              "peak_memory_bytes": 1000 + i}))
    summary = SweepSummary(sweep_name="s", sweep_path=str(tmp_path), objective=Objective("eval_accuracy", "max"),
                           scope="last", metric_for_best_model="eval_accuracy", greater_is_better=True, trials=runs,
                           winner=Winner("t2", 0.7, {}, None), test={"metrics": {"test_accuracy": 0.69}})
    report = bench.build_arm_report(summary, tmp_path, wall=12.34)
    assert report["median"]["train_samples_per_second"] == 12.0
    assert report["spread"]["train_samples_per_second"] == [10.0, 14.0]
    assert report["median"]["checkpoint_total_bytes"] == 400 and report["median"]["stored_bytes_per_trial"] == 400
    assert report["test_accuracy"] == 0.69 and report["winner"]["validation_accuracy"] == 0.7
    assert report["sweep_stored_bytes"] == 1200 and report["sweep_wall_s"] == 12.3


def test_overhead_pairs_give_medians_and_spread_and_the_gpu_mode_validates():
    from ftplat.config.loading import load_sweep_configs

    overhead = _load("overhead")
    a = overhead.resolve_defaults(overhead.build_parser().parse_args(["--use-gpu"]))
    assert (a.train_size, a.max_length, a.batch_size) == (8192, 160, 32)
    assert a.plain_process == "same"
    assert overhead.build_parser().parse_args(["--plain-process", "fresh"]).plain_process == "fresh"
    with pytest.raises(SystemExit):
        overhead.build_parser().parse_args(["--plain-process", "warm"])
    job, _ = overhead.build_configs(a, "/tmp/s", "/tmp/m")
    assert job.training.bf16 and job.resources.use_gpu and job.data.test_split is None
    plain = {"wall_s": 60.0, "train_runtime_s": 50.0, "train_samples_per_s": 10.0, "load_avg_at_start": 1.5,
             "step_time": {"step_ms_mean": 45.0}}

    def ours(samples, driver_wall, stored):
        return {"wall_s": driver_wall + 12, "trial_driver_wall_s": driver_wall, "train_runtime_s": 52.0,
                "train_samples_per_s": samples, "storage_vs_model": stored, "report_s": 0.8,
                "step_time": {"step_ms_mean": 50.0} if stored else None,
                "timeline_s": {"train": 52.5, "train_startup": 6.0}, "load_avg_at_start": 2.5}

    pairs = [overhead.build_pair(plain, ours(s, w, r)) for s, w, r in ((9.0, 70.0, 1.0), (10.0, 64.0, 1.1),
                                                                       (9.5, 67.0, None))]
    agg = overhead.aggregate(pairs)
    assert agg["throughput_ratio"] == {"median": 0.95, "min": 0.9, "max": 1.0, "n": 3}
    assert agg["per_trial_overhead_s"]["median"] == 5.0  # (67 - 52) - (60 - 50)
    assert agg["storage_vs_model"]["n"] == 2 and agg["timeline_s"]["train_startup"]["median"] == 6.0
    assert (agg["load_avg_min"], agg["load_avg_max"]) == (1.5, 2.5)
    assert "P1 throughput ratio 0.95 [0.9, 1] (n=3)" in overhead.format_report(agg)
    # Steady pace: plain's 45 ms a step over ftplat's 50; a side without a step clock gives none.
    assert agg["steady_step_ratio"] == {"median": 0.9, "min": 0.9, "max": 0.9, "n": 2}


def test_data_scale_writes_its_data_and_summarizes(tmp_path):
    import pyarrow.parquet as pq

    data_scale = _load("data_scale")
    a = data_scale.build_parser().parse_args(["--synthetic", "--sweep", "--rows", "50"])
    assert a.synthetic and a.sweep and a.repeats == 3
    data_scale.write_synthetic(str(tmp_path), 50)
    train = pq.read_table(tmp_path / "train.parquet")
    assert train.num_rows == 50 and len(train["text"][0].as_py().split()) == 25
    assert pq.read_table(tmp_path / "test.parquet").num_rows == 1000
    import _common

    assert _common.summarize([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}


def test_trial_gap_arguments():
    trial_gap = _load("trial_gap")
    a = trial_gap.build_parser().parse_args(["--repeats", "2", "--compare", "/tmp/before/platform"])
    assert (a.trials, a.repeats, a.compare, a.one) == (6, 2, "/tmp/before/platform", False)


def test_packing_layouts_and_counts(capsys):
    packing = _load("packing")
    a = packing.build_parser().parse_args(["--layouts", "1.0:0.25", "0.75:0.25", "1:0"])
    assert a.layouts == [(1.0, 0.25), (0.75, 0.25), (1.0, 0.0)]
    assert (a.nodes, a.cpus_per_node, a.concurrent) == (2, 2, 4)
    for bad in ("1.0", "0:0.25", "1.0:-1", "a:b"):
        with pytest.raises(SystemExit):
            packing.build_parser().parse_args(["--layouts", bad])
    assert "WORKER:DRIVER" in capsys.readouterr().err
    # two 2-CPU nodes: drivers of 0.25 leave room for three 1-CPU workers, none for four
    assert [packing.count_allowed(a, w, d) for w, d in a.layouts] == [3, 4, 4]
    windows = [{"train_start": 0.0, "train_end": 5.0}, {"train_start": 1.0, "train_end": 2.0},
               {"train_start": 5.0, "train_end": 6.0}, {"train_start": 5.5, "train_end": 7.0}]
    assert packing.count_most_at_once(windows) == 2  # one ending as another starts is not both


def test_train_startup_arguments():
    train_startup = _load("train_startup")
    a = train_startup.build_parser().parse_args(["--env", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER=0", "--job-env"])
    assert (a.repeats, a.env, a.job_env) == (5, [("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")], True)
    with pytest.raises(SystemExit):
        train_startup.build_parser().parse_args(["--env", "NOVALUE"])
    with pytest.raises(SystemExit):
        train_startup.main(["--repeats", "1"])


def test_trial_imports_reads_each_process_import_report(tmp_path):
    trial_imports = _load("trial_imports")
    a = trial_imports.build_parser().parse_args(["--env", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER=0"])
    assert (a.trials, a.env, a.one) == (2, [("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")], None)
    report = ["import time: self [us] | cumulative | imported package",
              "import time:       100 |     2000000 |     torch._C",
              "import time:       300 |     3000000 |   torch",
              "import time:        10 |     3100000 | ray.train.torch",
              "import time:        50 |      500000 | sklearn",
              "some other stderr line"]
    # nested imports are inside their top-level import's cumulative time, not added again
    assert trial_imports.read_import_report(report, top=1) == {"import_s": 3.6, "heaviest": {"ray.train.torch": 3.1}}
    for worker, name, lines in (("a", ":actor_name:RayTrainWorker", report), ("b", ":actor_name:RayTrainWorker", report[:4]),
                                ("c", ":task_name:run_remove_scratch", report[4:5]), ("d", "", [])):
        (tmp_path / f"worker-{worker}-01-1.err").write_text("\n".join(lines))
        (tmp_path / f"worker-{worker}-01-1.out").write_text(name + "\n")
    processes = trial_imports.read_session_imports(str(tmp_path))
    assert [(p["process"], p["import_s"]) for p in processes] == [
        ("RayTrainWorker", 3.6), ("RayTrainWorker", 3.1), ("run_remove_scratch", 0.5)]  # d imported nothing
    aggregate = trial_imports.build_aggregate(processes, trials=2)
    assert aggregate["import_s_per_trial"] == 3.6
    assert aggregate["processes"]["RayTrainWorker"] == {"per_trial": 1.0, "import_s_median": 3.6, "import_s_total": 6.7}
    assert list(aggregate["processes"]) == ["RayTrainWorker", "run_remove_scratch"]


def test_model_load_times_each_part_of_a_load(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    model_load = _load("model_load")
    a = model_load.build_parser().parse_args(["--model", "/m1", "--model", "/m2"])
    assert (a.repeats, a.model, a.one) == (3, ["/m1", "/m2"], None)
    model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=2))
    model.save_pretrained(tmp_path)
    record = model_load.run_one(str(tmp_path))
    assert record["parameters"] == sum(p.numel() for p in model.parameters())
    assert all(record[k] >= 0 for k in ("imports_s", "modeling_module_import_s", "first_from_pretrained_s",
                                        "second_from_pretrained_s"))


def test_trial_timelines_are_read_from_each_trial_record_and_summarized(tmp_path):
    from ftplat.layout import build_train_run_uri, build_trial_result_uri
    from ftplat.storage import write_json

    common, trial_gap = _load("_common"), _load("trial_gap")
    write_json(build_trial_result_uri(build_train_run_uri(str(tmp_path), "t1")),
               {"driver_wall_s": 9.0, "timeline_s": {"train": 5.0, "overhead": 4.0}})
    assert common.read_trial_timeline(str(tmp_path), "t1") == {"train": 5.0, "overhead": 4.0}
    assert common.read_trial_timeline(str(tmp_path), "stopped-by-asha") is None

    runs = [{"timelines_s": [{"train": 5.0, "overhead": 4.0}, None]},
            {"timelines_s": [{"train": 7.0, "overhead": 2.0}, {"train": 6.0}]}]
    assert trial_gap.summarize_timelines(runs) == {
        "overhead": {"median": 3.0, "min": 2.0, "max": 4.0, "n": 2},
        "train": {"median": 6.0, "min": 5.0, "max": 7.0, "n": 3}}


def test_worker_context_deadline_and_per_context_medians():
    wc = _load("worker_context")
    runs = [{"context": "process", "wall_s": 30.0, "train_runtime_s": 17.0, "step_ms_median": 48.0},
            {"context": "thread", "wall_s": 26.0, "train_runtime_s": 15.0, "step_ms_median": 45.0},
            {"context": "process", "wall_s": 20.0, "train_runtime_s": 13.0, "step_ms_median": 44.0}]
    assert wc.next_run_fits([], "process", 0.0, 1.0)
    # A context's own longest run estimates its next; before its first, the longest of any.
    assert wc.next_run_fits(runs, "thread", 120.0, 150.0) and not wc.next_run_fits(runs, "thread", 124.0, 150.0)
    assert not wc.next_run_fits(runs, "ftplat", 121.0, 150.0)
    stats = wc.build_by_context(runs, ["process", "thread", "ftplat"])
    assert stats["process"]["train_runtime_s"] == {"median": 15.0, "min": 13.0, "max": 17.0, "n": 2}
    assert stats["thread"]["step_ms_median"]["n"] == 1 and stats["ftplat"]["train_runtime_s"] is None
    a = wc.build_parser().parse_args(["--use-gpu"])
    assert wc.resolve_defaults(a).max_length == 160 and wc.CONTEXTS[0] == "process"


def test_first_steps_probe_charges_each_interval_to_the_later_stack():
    probe = _load("first_steps_probe")
    samples = [(1.1, "a"), (1.2, "b"), (2.2, "b"), (2.3, "a"), (2.4, "c")]
    record = probe.build_probe_record(1.0, samples, step_ends=[2.25, 2.45])
    assert record["step_ends_s"] == [1.25, 1.45] and record["samples"] == 5
    assert record["longest_gap_s"] == 1.0
    # The first step ends at 2.25: a 0.1 s, b 0.1 + 1.0 s; c comes after it.
    assert record["first_step_stacks_s"] == [["b", 1.1], ["a", 0.1]]
    assert record["top_stacks_s"] == [["b", 1.1], ["a", 0.2], ["c", 0.1]]
    assert probe.build_probe_record(1.0, [], [])["top_stacks_s"] == []


def test_first_steps_probe_names_a_lazy_import_by_its_module(tmp_path, monkeypatch):
    import threading
    import time

    probe = _load("first_steps_probe")
    (tmp_path / "slow_module_for_probe.py").write_text("import time\ntime.sleep(0.2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target, keys = threading.get_ident(), []

    def sample():
        for _ in range(15):
            frame = sys._current_frames().get(target)
            if frame is not None:
                keys.append(probe.build_frame_key(frame))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()

    def first_step():
        import slow_module_for_probe  # noqa: F401

    first_step()
    sampler.join()
    assert "import slow_module_for_probe < test_benchmarks.py:first_step" in keys
    monkeypatch.delitem(sys.modules, "slow_module_for_probe")


def test_checkpoint_persist_times_a_copy_and_a_link_of_a_trainer_checkpoint(tmp_path, monkeypatch):
    import types

    import ray.train
    from ray.train.v2._internal.execution.storage import StorageContext
    from transformers import BertConfig, BertForSequenceClassification

    persist_bench = _load("checkpoint_persist")
    a = persist_bench.build_parser().parse_args(["--model", "bert-base", "--repeats", "2"])
    assert (a.model, a.repeats) == (["bert-base"], 2)
    BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=32, num_labels=2)).save_pretrained(tmp_path / "model")
    source = tmp_path / "scratch" / "checkpoint-1"
    size = persist_bench.write_trainer_checkpoint(str(tmp_path / "model"), str(source))
    names = {p.name for p in source.iterdir()}
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"} <= names
    # AdamW keeps two moments per weight: the checkpoint is about three times the weights
    assert size > 2.5 * (source / "model.safetensors").stat().st_size
    storage = StorageContext(storage_path=str(tmp_path / "storage"), experiment_dir_name="train-bench")
    monkeypatch.setattr(ray.train, "get_context", lambda: types.SimpleNamespace(get_storage=lambda: storage))
    for mode in persist_bench.MODES:
        record = persist_bench.run_persist(mode, storage, str(source), f"checkpoint-{mode}")
        assert record["persist_s"] >= 0 and record["sync_after_s"] >= 0
        assert not (Path(storage.experiment_fs_path) / f"checkpoint-{mode}").exists()  # removed after timing
    assert {p.name for p in source.iterdir()} == names


def test_eval_offpath_evaluates_a_checkpoint_as_the_loop_does(tmp_path, tiny_model_dir, sentiment_data_dir):
    """The off-path validation task's function on a real checkpoint folder (no cluster): the
    Trainer's own evaluation of the held-out rows, with its accuracy and loss."""
    import ray.train

    eval_offpath = _load("eval_offpath")
    a = eval_offpath.build_parser().parse_args(["--data", str(sentiment_data_dir), "--train-rows", "32",
                                                "--eval-rows", "16", "--max-length", "16"])
    assert (a.steps, a.evals, a.repeats, a.validation_cpus, a.validation_gpus) == (64, 4, 3, 1, None)
    paths, held_out = eval_offpath.write_tokenized(a, str(tiny_model_dir), str(tmp_path))
    rows = eval_offpath._dataset(paths["test"])
    assert held_out == "test split"
    assert len(rows) == 16 and rows[0]["input_ids"].shape == (16,) and sorted(int(r["labels"]) for r in rows) == [0] * 8 + [1] * 8
    # a folder with only a train split (the GPU machine's sample): held-out rows never trained on
    import shutil

    import numpy as np
    import pyarrow.parquet as pq

    only_train = tmp_path / "only_train"
    only_train.mkdir()
    shutil.copy(sentiment_data_dir / "train.parquet", only_train)
    a.data = str(only_train)
    assert eval_offpath.write_tokenized(a, str(tiny_model_dir), str(only_train))[1] == "train split, rows not trained on"
    labels = np.asarray(pq.read_table(only_train / "train.parquet").column("label").to_pylist())
    trained, held = eval_offpath._pick(labels, 0, 32), eval_offpath._pick(labels, 16, 16)
    assert len(set(trained)) == 32 and len(set(held)) == 16 and not set(trained) & set(held)
    cfg = {"model": str(tiny_model_dir), "test": paths["test"], "steps": 8, "evals": 2, "batch": 4, "gpu": False,
           "validation_threads": 1}
    metrics = eval_offpath.validate(ray.train.Checkpoint.from_directory(str(tiny_model_dir)), cfg)
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and metrics["eval_loss"] > 0 and metrics["validation_s"] > 0
    with pytest.raises(SystemExit, match="multiple of --evals"):
        eval_offpath.main(["--steps", "10", "--evals", "4"])
