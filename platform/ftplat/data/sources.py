"""Reading raw splits from the hub (with a dataset configuration), a folder of files, or ``aclImdb/``."""

from __future__ import annotations

import csv
import logging
import re
from collections import defaultdict
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from ftplat.config.schema import DataConfig, looks_like_local_path
from ftplat.errors import UserError

logger = logging.getLogger(__name__)

#: File names users give a validation split other than the hub's ``validation``.
VALIDATION_LIKE = frozenset({"dev", "development", "val", "valid", "eval", "evaluation"})

#: A data file's format by its extension; TSV is read as CSV with tabs.
_FORMATS = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json"}
#: Compressions datasets opens for its CSV and JSON readers (train.jsonl.gz, test.csv.bz2).
_COMPRESSIONS = (".gz", ".bz2", ".xz")


def read_file_format(name: str) -> tuple[str | None, str]:
    """``(format, name without its extensions)`` of a data file; format None for any other
    file (a README, a compressed parquet file, which parquet compresses inside)."""
    base = name
    compressed = base.lower().endswith(_COMPRESSIONS)
    if compressed:
        base = base[: base.rindex(".")]
    stem, dot, extension = base.rpartition(".")
    form = _FORMATS.get(f".{extension.lower()}") if dot and stem else None
    if form == "parquet" and compressed:
        return None, name
    return form, stem if form else name


def find_acl_imdb_root(path: Path) -> Path | None:
    """The ``aclImdb`` folder (with ``train/pos`` etc.) at or directly under ``path``."""
    for candidate in (path, path / "aclImdb"):
        if (candidate / "train" / "pos").is_dir() and (candidate / "train" / "neg").is_dir():
            return candidate
    return None


#: A shard number after the split name: "-00000-of-00002" (the hub's parquet layout), "_part1",
#: "-0", ".3". Split names themselves may hold "_" and "-" (MNLI's "validation_matched").
_SHARD_SUFFIX = re.compile(r"[-_.](?:\d+-of-\d+|part[-_]?\d+|\d+)$")


def _split_of(file: Path) -> str:
    """The split a file holds: its name without the extensions and any shard number
    ("train-00000-of-00002.parquet", "test_part1.csv", "validation_matched.jsonl.gz")."""
    return _SHARD_SUFFIX.sub("", read_file_format(file.name)[1])


#: The label columns of an aclImdb folder: the sentiment its folder says (0 neg, 1 pos), and the
#: 1-10 star rating its file name ends with (``<id>_<rating>.txt``).
ACL_IMDB_LABELS = ("label", "rating")


def load_acl_imdb_split(root: Path, split: str, *, text_column: str, label_column: str) -> datasets.Dataset:
    """One split of an aclImdb folder: the reviews in ``text_column``, and ``label`` and
    ``rating``; ``label_column`` must name one of those (any other name was filled with the
    folder's 0/1, which a regression on stars, or ten classes, then trained on silently)."""
    if label_column not in ACL_IMDB_LABELS:
        raise UserError(f"data.label_column {label_column!r}: an aclImdb folder has the labels 'label' (0 neg, 1 pos: "
                        "its folder) and 'rating' (1-10 stars: its file name); name one of them")
    texts, labels, ratings = [], [], []
    for label, folder in enumerate(("neg", "pos")):
        for file in sorted((root / split / folder).glob("*.txt")):
            try:
                texts.append(file.read_text(encoding="utf-8"))
            except UnicodeDecodeError as exc:
                raise UserError(f"data.source: {file} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it "
                                "as UTF-8 or remove it") from None
            stem = file.stem.rpartition("_")[2]
            if not stem.isdigit():
                raise UserError(f"data.source: {file} is not named <id>_<rating>.txt as aclImdb's reviews are")
            labels.append(label)
            ratings.append(int(stem))
    return datasets.Dataset.from_dict({text_column: texts, "label": labels, "rating": ratings})


def load_local_splits(path: Path, cfg: DataConfig, required: list[str],
                      optional: list[str]) -> dict[str, datasets.Dataset]:
    if path.is_file():
        # One file holds one split (its name says which), and a sweep needs at least two.
        raise UserError(
            f"data.source {str(path)!r} is a file; give the folder that holds it, with one file (or more) per "
            f"split named after the split: {cfg.train_split}.parquet, test.parquet... (or .csv, .tsv, .json, .jsonl, "
            "those also gzip/bz2/xz-compressed)"
        )
    acl_root = find_acl_imdb_root(path)
    if acl_root is not None:
        present = [s for s in required + optional if (acl_root / s / "pos").is_dir()]
        missing = sorted(set(required) - set(present))
        if missing:
            raise UserError(
                f"data.source {str(path)!r}: aclImdb folder has no split {missing}; "
                "it has train and test"
            )
        return {
            s: load_acl_imdb_split(acl_root, s, text_column=cfg.text_column, label_column=cfg.label_column)
            for s in dict.fromkeys(present)
        }

    if (path / "dataset_dict.json").is_file():  # DatasetDict.save_to_disk's folder
        saved = datasets.load_from_disk(str(path))
        missing = [s for s in required if s not in saved]
        if missing:
            raise UserError(f"data.source {str(path)!r}: the saved DatasetDict has no split(s) {missing} (it has "
                            f"{sorted(saved)}); set data.train_split / data.validation.split / data.eval_split")
        return {s: saved[s] for s in dict.fromkeys(required + optional) if s in saved}

    files_by_split: dict[str, list[str]] = defaultdict(list)
    builders = set()
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        builder = read_file_format(file.name)[0]
        if builder:
            files_by_split[_split_of(file)].append(str(file))
            builders.add(builder)
    if not files_by_split:
        # A hub repository's layout (data/train-00000-of-00001.parquet), one level down.
        below = sorted({str(f.parent.relative_to(path)) for f in path.glob("*/*") if read_file_format(f.name)[0]})
        hint = (f"; {below[0]}/ holds some: give {str(path / below[0])!r} as data.source (its files named "
                "after their split)" if below else "")
        raise UserError(
            f"data.source {str(path)!r}: no parquet, CSV, TSV or JSON files and no aclImdb folder found{hint}"
        )
    if len(builders) > 1:
        raise UserError(f"data.source {str(path)!r}: mixes file formats {sorted(builders)}; keep one")
    for files in files_by_split.values():
        uncompressed = [f.rsplit(".", 1)[0] if f.lower().endswith(_COMPRESSIONS) else f for f in files]
        twice = sorted({Path(f).name for f in uncompressed if uncompressed.count(f) > 1})
        if twice:
            # gzip -k leaves both: read as one split, every row would count twice (and a
            # hold-out of train would score rows the trials trained on).
            raise UserError(f"data.source {str(path)!r} holds {twice[0]} both as it is and compressed; keep one of them")
    missing = [s for s in required if s not in files_by_split]
    if missing:
        raise UserError(
            f"data.source {str(path)!r}: no files for split(s) {missing} (found splits "
            f"{sorted(files_by_split)}); name files after their split, e.g. train.parquet, "
            "or set data.train_split / data.validation.split / data.eval_split"
        )
    builder = builders.pop()
    if "validation" in optional and "validation" not in files_by_split:
        # Looked for by its hub name only: a dev.csv would be left aside without a word.
        for name in sorted(set(files_by_split) & VALIDATION_LIKE - {*required, *optional}):
            logger.warning("data.source %r has a %r split, which no setting reads: trials are selected on rows held "
                           "out of %r; set data.validation.split: %s to select on it", str(path), name, required[0],
                           name)
    # One load per split: a single load takes the first split's column types for all of them,
    # so a split of another type failed inside datasets instead of in the checks that name it.
    wanted = [s for s in dict.fromkeys(required + optional) if s in files_by_split]
    return {s: load_split_files(builder, files_by_split[s], path, s) for s in wanted}


def check_parquet_files(files: list[str], source: Path) -> None:
    """Read each parquet footer first: datasets logs a corrupt file as an error of its own and
    then raises pyarrow's, with no word of which setting points at it."""
    for file in files:
        try:
            pq.read_schema(file)
        except (pa.ArrowInvalid, OSError) as exc:
            raise UserError(f"data.source {str(source)!r}: {Path(file).name} is not a readable parquet file "
                            f"({' '.join(str(exc).split())[:160]}); replace it or remove it from the folder") from None


def load_split_files(builder: str, files: list[str], source: Path, split: str) -> datasets.Dataset:
    if builder == "parquet":
        check_parquet_files(files, source)
    key = re.sub(r"\W", "_", split)  # datasets takes \w+ split names; a file's may hold "-"
    # pandas reads "None", "NA", "null", "n/a", "nan"... as missing: a review or a class named so
    # would be dropped or refused. Only an empty cell is missing, as in JSON and parquet.
    options = {"keep_default_na": False, "na_values": [""]} if builder in ("csv", "tsv") else {}
    if builder == "tsv":
        # A TSV field ends at a tab or a line end and quotes nothing (GLUE's files, IANA's
        # text/tab-separated-values): a review holding one '"' would swallow the lines after it.
        options.update(sep="\t", quoting=csv.QUOTE_NONE)
    try:
        return datasets.load_dataset("csv" if builder == "tsv" else builder, data_files={key: files}, split=key,
                                     **options)
    except datasets.exceptions.DatasetGenerationError as exc:
        # A corrupt file, or files of one split whose columns differ: the data is at fault.
        cause = exc.__cause__ or exc
        reason = " ".join(f"{type(cause).__name__}: {cause}".split())
        raise UserError(
            f"data.source {str(source)!r}: the {split!r} files {[Path(f).name for f in files]} could not be read "
            f"({reason[:200]}); every file of a split must be a valid {builder} file with the same columns"
        ) from None


def build_not_found_message(source: str, named: str, exc: BaseException) -> str:
    """The refusal of a ``data.source`` that is no local path and that the hub could not give."""
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    top = Path(source).parts[0] if Path(source).parts else ""
    meant = (f"; {top}/ exists here: as a local path, {source!r} does not exist" if top and Path(top).is_dir()
             else "")
    return (f"data.source {named} is not a local path and not a dataset the hub gave ({type(exc).__name__}: "
            f"{first[:160]}){meant}; give an existing folder (./data/imdb) or a reachable hub dataset id")


def load_raw_splits(cfg: DataConfig, read_columns: dict[str, str], *, required: list[str],
                    optional: list[str] = ()) -> dict[str, datasets.Dataset]:
    """The ``required`` splits and those of ``optional`` the data has, each checked to hold
    ``read_columns`` (``{config field: column}``, the task's)."""
    required, optional = list(dict.fromkeys(required)), [s for s in optional if s not in required]
    if looks_like_local_path(cfg.source):
        path = Path(cfg.source).expanduser()
        if not path.exists():
            raise UserError(f"data.source {cfg.source!r} does not exist; give a local path or a hub id")
        if cfg.config_name is not None and find_acl_imdb_root(path) is None:
            logger.info("data.config_name %r ignored: %s is a local folder", cfg.config_name, cfg.source)
        splits = load_local_splits(path, cfg, required, optional)
    else:
        named = f"{cfg.source!r}" + (f" (configuration {cfg.config_name!r})" if cfg.config_name else "")
        logger.info("Loading %s from the Hugging Face hub", named)
        try:
            loaded = datasets.load_dataset(cfg.source, cfg.config_name, revision=cfg.revision)
        except OSError as exc:
            # Not on the hub, or no hub to ask (datasets raises FileNotFoundError or
            # ConnectionError): most often a local path without ./ that does not exist here.
            raise UserError(build_not_found_message(cfg.source, named, exc)) from None
        except ValueError as exc:
            # Raised for a missing or unknown configuration name, with the names it has.
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise UserError(f"data.source {named}: {first}; set data.config_name to one it has") from None
        missing = [s for s in required if s not in loaded]
        if missing:
            raise UserError(f"data.source {named} has no split(s) {missing}; it has {list(loaded)}")
        splits = {s: loaded[s] for s in required + optional if s in loaded}

    for split, ds in splits.items():
        for field, column in read_columns.items():
            if column not in ds.column_names:
                # A test split is read because it is there; one without labels (a Kaggle
                # test.csv) can be left out.
                skip = (", or set data.test_split: null to score no test split" if split == cfg.test_split
                        and split in optional else "")
                raise UserError(
                    f"data.{field} {column!r} is not a column of split {split!r} of "
                    f"{cfg.source!r}; its columns are {ds.column_names}{skip}"
                )
    return splits
