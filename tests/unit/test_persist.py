"""Checkpoints hard-linked into local storage, and Ray's copy wherever a link is not safe."""

import errno
import os
import types

import pyarrow.fs as pafs
import pytest
import ray.train
from ray.train.v2._internal.constants import VALIDATE_STORAGE_MARKER_FILENAME
from ray.train.v2._internal.execution.context import is_managed_checkpoint
from ray.train.v2._internal.execution.storage import StorageContext

from ftplat.ray_internals import RunStorage
from ftplat.train import persist
from ftplat.train.persist import CheckpointPersister, build_link_refusal, run_link_tree

FILES = {"model.safetensors": b"weights" * 100, "optimizer.pt": b"moments" * 200,
         "trainer_state.json": b"{}", "global_step6/zero_pp_rank_0_mp_rank_00_optim_states.pt": b"shard"}


def make_checkpoint(root):
    for rel, data in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def fail_link_at(monkeypatch, call, code):
    """``os.link`` in persist raises ``code`` at its ``call``-th call (counted from 1)."""
    real_link, calls = os.link, []

    def link(a, b):
        calls.append(a)
        if len(calls) == call:
            raise OSError(code, os.strerror(code))
        real_link(a, b)

    monkeypatch.setattr(persist.os, "link", link)


def test_link_tree_links_every_file_and_replaces_what_was_there(tmp_path):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    dest = tmp_path / "storage" / "checkpoint-6"
    dest.mkdir(parents=True)
    (dest / "model.safetensors").write_bytes(b"an older upload")
    (dest / "other_node_rank.pt").write_bytes(b"another node's part")

    made = run_link_tree(str(src), str(dest))

    assert len(made) == len(FILES)
    assert read_tree(dest) == {**FILES, "other_node_rank.pt": b"another node's part"}
    for rel in FILES:
        assert os.path.samefile(src / rel, dest / rel)
    assert not list(dest.glob("*.link-*"))
    assert run_link_tree(str(src), str(dest)) == []  # already there: nothing to do


def test_a_failed_link_removes_the_links_it_made_and_leaves_the_source_whole(tmp_path, monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    dest = tmp_path / "storage" / "checkpoint-6"
    fail_link_at(monkeypatch, 3, errno.EXDEV)
    with pytest.raises(OSError):
        run_link_tree(str(src), str(dest))
    assert read_tree(dest) == {}
    assert read_tree(src) == FILES


def test_link_refusals_name_why(tmp_path, monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    (tmp_path / "storage").mkdir()

    def storage(filesystem=pafs.LocalFileSystem()):
        return RunStorage(run_dir=str(tmp_path / "storage"), filesystem=filesystem, checkpoint_path=None,
                          copy_checkpoint=None)

    assert "does not see" in build_link_refusal(str(src), storage())
    (tmp_path / "storage" / VALIDATE_STORAGE_MARKER_FILENAME).touch()
    assert build_link_refusal(str(src), storage()) is None
    assert "not a local path" in build_link_refusal(str(src), storage(pafs._MockFileSystem()))

    (src / "link.json").symlink_to(src / "trainer_state.json")
    assert "symbolic links" in build_link_refusal(str(src), storage())
    (src / "link.json").unlink()

    real_stat = os.stat
    monkeypatch.setattr(persist.os, "stat", lambda p, *a, **k: types.SimpleNamespace(
        st_dev=real_stat(p).st_dev + (1 if str(p) == str(tmp_path / "storage") else 0)))
    assert "another filesystem" in build_link_refusal(str(src), storage())


@pytest.fixture
def storage_context(tmp_path, monkeypatch):
    storage = StorageContext(storage_path=str(tmp_path / "results"), experiment_dir_name="train-abc")
    monkeypatch.setattr(ray.train, "get_context", lambda: types.SimpleNamespace(get_storage=lambda: storage))
    return storage


def test_persister_links_into_ray_storage(tmp_path, storage_context):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    persister = CheckpointPersister()
    stored = persister(ray.train.Checkpoint.from_directory(str(src)), "checkpoint-6")
    assert is_managed_checkpoint(storage_context, stored)
    assert stored.path == storage_context.build_checkpoint_path_from_name("checkpoint-6")
    assert os.path.samefile(src / "optimizer.pt", os.path.join(stored.path, "optimizer.pt"))
    assert persister.counts.to_dict() == {"linked": 1, "copied": 0, "copy_reason": None}


def test_persister_copies_when_a_link_fails_without_writing_through_to_the_source(tmp_path, storage_context,
                                                                                   monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    fail_link_at(monkeypatch, 2, errno.EPERM)
    persister = CheckpointPersister()
    stored = persister(ray.train.Checkpoint.from_directory(str(src)), "checkpoint-6")
    assert is_managed_checkpoint(storage_context, stored)
    assert read_tree(src) == FILES
    assert read_tree(type(src)(stored.path)) == FILES
    assert not os.path.samefile(src / "model.safetensors", os.path.join(stored.path, "model.safetensors"))
    counts = persister.counts.to_dict()
    assert counts["linked"] == 0 and counts["copied"] == 1 and "linking failed" in counts["copy_reason"]


def test_persister_copies_where_the_node_does_not_see_the_storage(tmp_path, storage_context):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    os.remove(os.path.join(storage_context.experiment_fs_path, VALIDATE_STORAGE_MARKER_FILENAME))
    with pytest.raises(RuntimeError, match="read/write access"):  # Ray's own error, as without ftplat
        CheckpointPersister()(ray.train.Checkpoint.from_directory(str(src)), "checkpoint-6")
