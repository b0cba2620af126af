"""Shared fixtures: offline tiny assets (no hub access here or in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent / "support"))

from tiny_assets import write_sentiment_dataset, write_tiny_bert  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer BERT and a WordPiece tokenizer trained on the fly, saved like a hub model."""
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def sentiment_data_dir(tmp_path_factory) -> Path:
    """train.parquet / test.parquet with text and label columns (the IMDB schema)."""
    return write_sentiment_dataset(tmp_path_factory.mktemp("sentiment"), n_train=2048, n_eval=256)


@pytest.fixture(autouse=True, scope="session")
def mlflow_store_outside_the_repo(tmp_path_factory):
    """Sweeps track to MLflow by default; keep the default sqlite store out of the checkout."""
    import os

    previous = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"
    yield
    if previous is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = previous
