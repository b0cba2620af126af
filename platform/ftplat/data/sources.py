"""Reading raw text-classification splits from the hub, a folder of files, or ``aclImdb/``."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import datasets

from ftplat.config.schema import DataConfig, looks_like_local_path
from ftplat.errors import UserError

logger = logging.getLogger(__name__)

_BUILDERS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}


def find_acl_imdb_root(path: Path) -> Path | None:
    """The ``aclImdb`` folder (with ``train/pos`` etc.) at or directly under ``path``."""
    for candidate in (path, path / "aclImdb"):
        if (candidate / "train" / "pos").is_dir() and (candidate / "train" / "neg").is_dir():
            return candidate
    return None


def _split_of(file: Path) -> str:
    # "train.parquet", "train-00000-of-00002.parquet" and "test_part1.csv" name their split first.
    stem = file.name.split(".")[0]
    for sep in ("-", "_"):
        stem = stem.split(sep)[0]
    return stem


def load_acl_imdb_split(root: Path, split: str, *, text_column: str, label_column: str) -> datasets.Dataset:
    texts, labels = [], []
    for label, folder in enumerate(("neg", "pos")):
        for file in sorted((root / split / folder).glob("*.txt")):
            texts.append(file.read_text(encoding="utf-8"))
            labels.append(label)
    return datasets.Dataset.from_dict({text_column: texts, label_column: labels})


def load_local_splits(path: Path, cfg: DataConfig) -> dict[str, datasets.Dataset]:
    wanted = (cfg.train_split, cfg.eval_split)
    acl_root = find_acl_imdb_root(path)
    if acl_root is not None:
        present = [s for s in wanted if (acl_root / s / "pos").is_dir()]
        missing = set(wanted) - set(present)
        if missing:
            raise UserError(
                f"data.source {str(path)!r}: aclImdb folder has no split {sorted(missing)}; "
                "it has train and test"
            )
        return {
            s: load_acl_imdb_split(acl_root, s, text_column=cfg.text_column, label_column=cfg.label_column)
            for s in wanted
        }

    files_by_split: dict[str, list[str]] = defaultdict(list)
    builders = set()
    candidates = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    for file in candidates:
        builder = _BUILDERS.get(file.suffix.lower())
        if builder:
            files_by_split[_split_of(file)].append(str(file))
            builders.add(builder)
    if not files_by_split:
        raise UserError(
            f"data.source {str(path)!r}: no parquet, CSV or JSON files and no aclImdb folder found"
        )
    if len(builders) > 1:
        raise UserError(f"data.source {str(path)!r}: mixes file formats {sorted(builders)}; keep one")
    missing = [s for s in wanted if s not in files_by_split]
    if missing:
        raise UserError(
            f"data.source {str(path)!r}: no files for split(s) {missing} (found splits "
            f"{sorted(files_by_split)}); name files after their split, e.g. train.parquet, "
            "or set data.train_split / data.eval_split"
        )
    loaded = datasets.load_dataset(
        builders.pop(), data_files={s: files_by_split[s] for s in dict.fromkeys(wanted)}
    )
    return {s: loaded[s] for s in wanted}


def load_raw_splits(cfg: DataConfig) -> dict[str, datasets.Dataset]:
    """Return ``{cfg.train_split: ..., cfg.eval_split: ...}`` with the configured columns checked."""
    if looks_like_local_path(cfg.source):
        path = Path(cfg.source).expanduser()
        if not path.exists():
            raise UserError(f"data.source {cfg.source!r} does not exist; give a local path or a hub id")
        splits = load_local_splits(path, cfg)
    else:
        logger.info("Loading %s from the Hugging Face hub", cfg.source)
        loaded = datasets.load_dataset(cfg.source)
        missing = [s for s in (cfg.train_split, cfg.eval_split) if s not in loaded]
        if missing:
            raise UserError(f"data.source {cfg.source!r} has no split(s) {missing}; it has {list(loaded)}")
        splits = {s: loaded[s] for s in (cfg.train_split, cfg.eval_split)}

    for split, ds in splits.items():
        for field, column in (("text_column", cfg.text_column), ("label_column", cfg.label_column)):
            if column not in ds.column_names:
                raise UserError(
                    f"data.{field} {column!r} is not a column of split {split!r} of "
                    f"{cfg.source!r}; its columns are {ds.column_names}"
                )
    return splits
