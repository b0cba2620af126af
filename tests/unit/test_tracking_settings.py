"""What the pre-flight tells of a tracking URI without a server: a new local folder store
(which MLflow 3 refuses after Ray had started) is refused, a database or a named remote
(databricks) is not taken for a folder."""

from __future__ import annotations

import pytest

from ftplat.config.schema import TrackingConfig
from ftplat.errors import UserError
from ftplat.tracking.runs import check_tracking_settings, read_new_local_store


@pytest.mark.parametrize("uri", ["databricks", "databricks://profile", "http://127.0.0.1:5000"])
def test_remote_stores_are_not_local_folders(uri):
    assert read_new_local_store(uri) is None
    assert check_tracking_settings(TrackingConfig(tracking_uri=uri)) == uri


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.parametrize("given", ["mlruns", "file:{tmp}/mlruns", "{tmp}/mlflow.db"])
def test_a_folder_store_is_refused_and_left_unmade(tmp_path, monkeypatch, given, existing):
    monkeypatch.chdir(tmp_path)
    if existing:  # MLflow 3 refuses one that holds runs as well
        (tmp_path / given.format(tmp=tmp_path).removeprefix("file:")).mkdir()
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = given.format(tmp=tmp_path)
    with pytest.raises(UserError, match=r"is a folder store, which MLflow 3 no longer opens; give a database such as "
                                         r"'sqlite:///.*\.db'"):
        check_tracking_settings(TrackingConfig(tracking_uri=uri))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert check_tracking_settings(TrackingConfig(tracking_uri=uri)) == uri
    assert len(list(tmp_path.iterdir())) == int(existing)


def test_a_new_sqlite_store_passes_unmade(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert check_tracking_settings(TrackingConfig(tracking_uri=uri)) == uri and list(tmp_path.iterdir()) == []
