"""``ftplat sweep`` on bad input files and values, as a user runs it: every refusal exits 2 with
one ``error:`` line naming the field or path and the fix, starts no Ray session and leaves the
storage root as it was.

The config cases stop before the heavy imports. The data and model cases go through the
sweep's pre-flight (the model folder check, reading and tokenizing the data), so they also check
that it runs before anything is written or started; refusals the in-process CLI tests already
cover (test_cli.py: a missing model folder or column) are not repeated here. All cases run at once in one module fixture (a few at a time, each a
child of a fork server that imported torch and transformers once); each test then reads its
recorded outcome, and one case is run again as a plain subprocess to check the server.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_refusals import Case, check_refused, run_battery, run_case
from tiny_assets import build_sentiment_rows

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
#: Data and model cases: a small real model and data set, and no MLflow (what they test is the
#: data or the model folder, and each case would otherwise create its own tracking store).
RUN = ["--model", "{model}", "--dataset", "{data}", "--storage", "{storage}", "tracking.enabled=false"]


def case(name: str, args: list[str], names: str) -> Case:
    return Case(name, args, names, env=dict(OFFLINE))


def config_case(name: str, args: list[str], names: str) -> Case:
    return case(name, [*args, "--storage", "{storage}"], names)


def data_case(name: str, dataset: str, extra: list[str], names: str) -> Case:
    args = [*RUN, *extra]
    args[args.index("{data}")] = dataset
    return case(name, args, names)


def model_case(name: str, model: str, names: str) -> Case:
    args = list(RUN)
    args[args.index("{model}")] = model
    return case(name, args, names)


CASES = [
    # config files
    config_case("empty-config", ["--config", "{tmp}/empty.yaml"], "--config file is empty"),
    config_case("comments-only-config", ["--config", "{tmp}/comments.yaml"], "leave out --config"),
    config_case("empty-search-space", ["--search-space", "{tmp}/empty.yaml"], "--search-space file is empty"),
    config_case("tab-in-config", ["--config", "{tmp}/tab.yaml"], "tab.yaml: not valid YAML at line 3, column 1"),
    config_case("tab-in-search-space", ["--search-space", "{tmp}/tab_space.yaml"],
                "replace the tab on that line with spaces"),
    config_case("unclosed-bracket", ["--config", "{tmp}/unclosed.yaml"], "not valid YAML at line 3, column 1"),
    config_case("list-at-top", ["--config", "{tmp}/list.yaml"], "expected a mapping at the top level"),
    config_case("missing-config", ["--config", "{tmp}/nope.yaml"], "config file '{tmp}/nope.yaml' does not exist"),
    config_case("config-is-a-directory", ["--config", "{tmp}"], "--config '{tmp}' is a directory"),
    config_case("key-given-twice", ["--config", "{tmp}/twice.yaml"],
                "twice.yaml: not valid YAML at line 3, column 1: duplicate key 'training' (first at line 1)"),
    config_case("unknown-key", ["--config", "{tmp}/unknown.yaml"], "training.lerning_rate: unknown key"),
    config_case("search-space-as-config", ["--config", "search_spaces/smoke.yaml"],
                "are search-space keys; pass this file with --search-space"),
    config_case("job-config-as-search-space", ["--search-space", "jobs/configs/imdb_cpu.yaml"],
                "are job-config keys; pass this file with --config"),
    config_case("search-key-without-prefix", ["num_samples=4"], "prefix search-space overrides with 'search.'"),
    config_case("string-for-number", ["--config", "{tmp}/string_lr.yaml"], "write it as a YAML number"),
    config_case("word-for-int", ["resources.num_workers=two"], "resources.num_workers: Input should be a valid integer"),
    config_case("override-without-value", ["training.learning_rate"], "expected key=value"),
    config_case("override-into-a-value", ["training.seed=1", "training.seed.x=2"], "'seed' is a value, not a section"),
    config_case("negative-lr", ["training.learning_rate=-1"], "training.learning_rate: Input should be greater than 0"),
    config_case("max-length-too-small", ["data.max_length=4"], "data.max_length"),
    config_case("empty-texts-policy", ["data.empty_texts=skip"], "data.empty_texts: Input should be 'error' or 'drop'"),
    # values transformers checks only inside a worker
    config_case("unknown-optimizer", ["training.optim=adamw_fake"], "training.optim: 'adamw_fake' is not an optimizer"),
    config_case("unknown-scheduler", ["training.lr_scheduler_type=cosine_restarts"], "training.lr_scheduler_type"),
    config_case("fp16-on-cpu", ["training.fp16=true"], "training.fp16 is true but resources.use_gpu is false"),
    config_case("fp16-and-bf16", ["training.fp16=true", "training.bf16=true", "resources.use_gpu=true"],
                "fp16 and bf16 cannot both be true"),
    # search spaces
    config_case("unknown-distribution", ["search.parameters.training.learning_rate={{type: normal, low: 0.1, high: 0.2}}"],
                "does not match any of the expected tags"),
    config_case("low-above-high", ["--search-space", "{tmp}/low_high.yaml"],
                "parameters.training.learning_rate: low (0.001) must be below high (1e-05)"),
    config_case("unknown-parameter-path", ["search.parameters.training.learnin_rate={{type: uniform, low: 0.1, high: 0.2}}"],
                "'learnin_rate' is not a field of training"),
    config_case("objective-mode-mismatch", ["search.objective={{metric: eval_loss, mode: max}}"],
                "that metric is minimised; use mode: min"),
    config_case("searched-per-sweep-field", ["search.parameters.data.max_length={{type: int, low: 64, high: 256}}"],
                "parameters.data.max_length: cannot vary per trial"),
    config_case("point-outside-range", ["search.parameters={{training.learning_rate: {{type: loguniform, low: 1e-5, "
                                        "high: 1e-4}}}}", "search.points_to_evaluate=[{{training.learning_rate: 5}}]"],
                "points_to_evaluate[0].training.learning_rate: 5 is outside the searched range"),
    config_case("greater-is-better-against-metric", ["training.greater_is_better=false"],
                "training.greater_is_better is false for eval_accuracy: that metric is maximised"),
    config_case("optimizer-choice", ["search.parameters={{training.optim: {{type: choice, values: [adamw_torch, adamw_fake]}}}}"],
                "parameters.training.optim can take 'adamw_fake'"),
    # MLflow's own rules, found only after Ray had started (or at registration, after training)
    config_case("registered-model-name-with-slash", ["tracking.registered_model_name=team/imdb"],
                "tracking.registered_model_name 'team/imdb': Invalid model name 'team/imdb'. Names cannot contain"),
    config_case("empty-experiment-name", ["tracking.experiment_name=''"],
                "tracking.experiment_name '': Invalid experiment name"),
    config_case("folder-tracking-store", ["tracking.tracking_uri={tmp}/mlruns"],
                "is a folder store, which MLflow 3 no longer opens; give a database such as 'sqlite:///{tmp}/mlruns.db'"),
    # the fix, and the override rather than the file
    config_case("parameter-without-type", ["search.parameters.training.learning_rate={{typ: loguniform, low: 1.0e-5, "
                                           "high: 1.0e-4}}"],
                "needs a type key, one of loguniform, uniform, int, choice (type: loguniform); unknown key(s) 'typ'"),
    config_case("section-typo-in-override", ["--config", "jobs/configs/imdb_cpu.yaml", "trainig.learning_rate=1e-5"],
                "error: override trainig.learning_rate=1e-5: trainig: unknown key"),
    config_case("section-rule-of-override", ["--config", "jobs/configs/imdb_cpu.yaml", "data.eval_split=train"],
                "error: override data.eval_split=train: data: eval_split 'train' is the train split"),
    # data: content, not only the schema
    data_case("csv-texts-all-empty", "{tmp}/csv_all_empty", [], "data.text_column 'text' of split 'train': all 4 texts"),
    data_case("parquet-empty-texts", "{tmp}/parquet_empty", [],
              "data.text_column 'text' of split 'train' has 2 empty or whitespace-only texts of 40"),
    data_case("whitespace-only-texts", "{tmp}/whitespace", [], "set data.empty_texts: drop"),
    data_case("dropped-below-train-size", "{tmp}/parquet_empty", ["data.empty_texts=drop", "data.train_size=40"],
              "data.train_size 40 is larger than split 'train', which has 34 rows after dropping 2 empty texts and "
              "holding out 4 for validation"),
    data_case("numbers-as-texts", "{tmp}/numbers", [], "holds non-text values"),
    data_case("train-size-too-large", "{data}", ["data.train_size=5000"],
              "data.train_size 5000 is larger than split 'train', which has 1843 rows after holding out 205"),
    data_case("eval-size-too-large", "{data}", ["data.eval_split=test", "data.eval_size=1000"],
              "data.eval_size 1000 is larger than split 'test', which has 256 rows"),
    data_case("single-file", "{data}/train.parquet", [], "is a file; give the folder that holds it"),
    data_case("missing-split", "{data}", ["data.eval_split=validation"], "no files for split(s) ['validation']"),
    data_case("label-out-of-range", "{tmp}/label_3", [], "has label 3 outside 0..1"),
    data_case("label-names-unknown", "{tmp}/label_names", [], "holds labels ['bad', 'good'] that model.id2label"),
    data_case("corrupt-parquet", "{tmp}/corrupt", [], "train.parquet is not a readable parquet file"),
    data_case("dataset-path-without-dot", "tests/no-such-dataset", [],
              "data.source 'tests/no-such-dataset' is not a local path and not a dataset the hub gave"),
    # model folders
    model_case("empty-model-dir", "{tmp}/model_empty", "is an empty directory"),
    model_case("tokenizer-only-model", "{tmp}/model_tokenizer_only", "is missing config.json; weights"),
    model_case("weights-only-model", "{tmp}/model_weights_only", "tokenizer files (one of tokenizer.json"),
    model_case("model-without-config", "{tmp}/model_no_config", "is missing config.json; save the model"),
    model_case("sharded-model-missing-shard", "{tmp}/model_sharded", "is missing shard model-00002-of-00002.safetensors"),
]

#: Cases whose one line must say more than ``Case.names`` (the hint that is the fix).
ALSO = {
    "tab-in-config": ["YAML indents with spaces only"],
    "unclosed-bracket": ["unclosed.yaml"],
    "unknown-optimizer": ["closest: ", "OptimizerNames"],
    "csv-texts-all-empty": ["check data.text_column"],
    "whitespace-only-texts": ["data.text_column 'text' of split 'test' has 3 empty"],
    "single-file": ["data.source", "train.parquet, test.parquet"],
    "corrupt-parquet": ["data.source"],
    "empty-model-dir": ["model.name_or_path"],
    "tokenizer-only-model": ["model.name_or_path", "model.safetensors"],
    "weights-only-model": ["model.name_or_path", "tokenizer.json"],
    "search-space-as-config": ["parameters, objective"],
    "dataset-path-without-dot": ["tests/ exists here: as a local path, 'tests/no-such-dataset' does not exist"],
}


def write_split_files(folder: Path, train: dict, test: dict) -> None:
    folder.mkdir()
    pq.write_table(pa.table(train), folder / "train.parquet")
    pq.write_table(pa.table(test), folder / "test.parquet")


def write_bad_inputs(tmp: Path, model: Path) -> None:
    files = {
        "empty.yaml": "",
        "comments.yaml": "# every setting is commented out\n# training:\n#   learning_rate: 3.0e-5\n",
        "tab.yaml": "training:\n  learning_rate: 3.0e-5\n\tweight_decay: 0.0\n",
        "tab_space.yaml": "num_samples: 2\nparameters:\n\ttraining.learning_rate: {type: uniform, low: 0.1, high: 0.2}\n",
        "unclosed.yaml": "training:\n  learning_rate: [3.0e-5\n",
        "list.yaml": "- training\n- data\n",
        "unknown.yaml": "training:\n  lerning_rate: 3.0e-5\n",
        "twice.yaml": "training:\n  learning_rate: 3.0e-5\ntraining:\n  seed: 1\n",
        "string_lr.yaml": "training:\n  learning_rate: 3e-5\n",
        "low_high.yaml": "parameters:\n  training.learning_rate: {type: loguniform, low: 1.0e-3, high: 1.0e-5}\n",
    }
    for name, text in files.items():
        (tmp / name).write_text(text)

    good = build_sentiment_rows(40, seed=5)
    (tmp / "csv_all_empty").mkdir()
    for split in ("train", "test"):
        (tmp / "csv_all_empty" / f"{split}.csv").write_text("text,label\n,0\n,1\n,0\n,1\n")
    write_split_files(tmp / "parquet_empty", {**good, "text": ["", *good["text"][1:-1], ""]}, good)
    write_split_files(tmp / "whitespace", good, {**good, "text": ["  ", "\n\t", " \n", *good["text"][3:]]})
    write_split_files(tmp / "numbers", {"text": list(range(40)), "label": good["label"]}, good)
    write_split_files(tmp / "label_3", {**good, "label": [*good["label"][:-1], 3]}, good)
    write_split_files(tmp / "label_names", {**good, "label": ["good", "bad"] * 20}, good)
    write_split_files(tmp / "corrupt", good, good)
    (tmp / "corrupt" / "train.parquet").write_bytes(b"PAR1 cut short by a failed copy")

    tokenizer_files = [p for p in model.iterdir() if p.name.startswith("tokenizer")]
    weights = [model / "config.json", model / "model.safetensors"]
    for name, keep in {"model_empty": [], "model_tokenizer_only": tokenizer_files, "model_weights_only": weights,
                       "model_no_config": [model / "model.safetensors", *tokenizer_files],
                       "model_sharded": [model / "config.json", *tokenizer_files]}.items():
        (tmp / name).mkdir()
        for file in keep:
            shutil.copy(file, tmp / name / file.name)
    # An index naming two shards, one of them not copied (an interrupted download).
    shutil.copy(model / "model.safetensors", tmp / "model_sharded" / "model-00001-of-00002.safetensors")
    (tmp / "model_sharded" / "model.safetensors.index.json").write_text(
        '{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", '
        '"b": "model-00002-of-00002.safetensors"}}')


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, tiny_model_dir, sentiment_data_dir):
    tmp = tmp_path_factory.mktemp("refusals-input")
    write_bad_inputs(tmp, tiny_model_dir)
    # A storage root that already holds a sweep: a refusal must leave all of it as it was.
    storage = tmp / "storage"
    (storage / "earlier-sweep").mkdir(parents=True)
    (storage / "earlier-sweep" / "summary.json").write_text("{}")
    fill = {"storage": str(storage), "model": str(tiny_model_dir), "data": str(sentiment_data_dir), "tmp": str(tmp)}
    return run_battery(CASES, storage=storage, fill=fill, workers=3), fill


def test_the_battery_is_wide():
    assert len(CASES) >= 25 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("bad", CASES, ids=lambda c: c.name)
def test_bad_input_is_refused_before_any_work(outcomes, bad):
    results, fill = outcomes
    bad = Case(bad.name, bad.args, bad.names.format(**fill), bad.env)
    check_refused(results[bad.name], bad)
    line = results[bad.name].stderr_lines[0]
    for text in ALSO.get(bad.name, []):
        assert text in line, f"{bad.name}: {line!r} lacks {text!r}"


def test_the_fork_server_refuses_as_a_plain_process_does(outcomes):
    """The case that goes furthest (the data read, split and checked) run again as a user runs
    it, from a fresh interpreter: same exit code and the same one line."""
    results, fill = outcomes
    bad = next(c for c in CASES if c.name == "train-size-too-large")
    plain = run_case(bad, storage=Path(fill["storage"]), fill=fill)
    served = results[bad.name]
    assert (plain.returncode, plain.stderr_lines) == (served.returncode, served.stderr_lines)
    assert not plain.ray_sessions and plain.storage_after == plain.storage_before
