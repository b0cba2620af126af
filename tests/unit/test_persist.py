"""Checkpoints hard-linked into local storage, and Ray's copy wherever a link is not safe."""

import errno
import os
import shutil
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
    real_link, calls = os.link, []

    def link(a, b):
        calls.append(a)
        if len(calls) == 3:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_link(a, b)

    monkeypatch.setattr(persist.os, "link", link)
    with pytest.raises(OSError):
        run_link_tree(str(src), str(dest))
    assert read_tree(dest) == {}
    assert read_tree(src) == FILES


def test_link_refusals_name_why_and_whether_ray_can_copy_in_the_background(tmp_path, monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    (tmp_path / "storage").mkdir()

    def storage(filesystem=pafs.LocalFileSystem()):
        return RunStorage(run_dir=str(tmp_path / "storage"), filesystem=filesystem, checkpoint_path=None,
                          copy_checkpoint=None)

    # Ray's copy raises its own error about storage the nodes do not share, in the loop
    assert build_link_refusal(str(src), storage()) == ("this node does not see the run's storage folder", False)
    (tmp_path / "storage" / VALIDATE_STORAGE_MARKER_FILENAME).touch()
    assert build_link_refusal(str(src), storage()) is None
    assert build_link_refusal(str(src), storage(pafs._MockFileSystem())) == (
        "storage is _MockFileSystem, not a local path", True)

    (src / "link.json").symlink_to(src / "trainer_state.json")
    assert build_link_refusal(str(src), storage()) == ("the checkpoint holds symbolic links", False)
    (src / "link.json").unlink()

    on_another_device(monkeypatch, tmp_path / "storage")
    assert build_link_refusal(str(src), storage()) == ("storage is on another filesystem than the scratch folder", True)


def on_another_device(monkeypatch, folder):
    real = persist.read_device
    monkeypatch.setattr(persist, "read_device", lambda p: real(p) + (1 if str(p) == str(folder) else 0))


def fail_link_at(monkeypatch, call, code=errno.EPERM):
    real_link, calls = os.link, []

    def link(a, b):
        calls.append(a)
        if len(calls) == call:
            raise OSError(code, os.strerror(code))
        real_link(a, b)

    monkeypatch.setattr(persist.os, "link", link)


@pytest.fixture
def storage_context(tmp_path, monkeypatch):
    storage = StorageContext(storage_path=str(tmp_path / "results"), experiment_dir_name="train-abc")
    monkeypatch.setattr(ray.train, "get_context", lambda: types.SimpleNamespace(get_storage=lambda: storage))
    return storage


def test_persister_links_into_ray_storage(tmp_path, storage_context):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    persister = CheckpointPersister()
    args = persister.build_report_args(str(src), "checkpoint-6")
    assert set(args) == {"checkpoint", "checkpoint_upload_fn"}  # Ray's SYNC mode, our upload
    stored = args["checkpoint_upload_fn"](args["checkpoint"], "checkpoint-6")
    assert is_managed_checkpoint(storage_context, stored)
    assert stored.path == storage_context.build_checkpoint_path_from_name("checkpoint-6")
    assert os.path.samefile(src / "optimizer.pt", os.path.join(stored.path, "optimizer.pt"))
    assert persister.counts.to_dict() == {"linked": 1, "copied": 0, "copied_in_background": 0, "copy_reason": None}


def test_persister_copies_when_a_link_fails_without_writing_through_to_the_source(tmp_path, storage_context,
                                                                                   monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    persister = CheckpointPersister()
    args = persister.build_report_args(str(src), "checkpoint-6")
    fail_link_at(monkeypatch, 2)
    stored = args["checkpoint_upload_fn"](args["checkpoint"], "checkpoint-6")
    assert is_managed_checkpoint(storage_context, stored)
    assert read_tree(src) == FILES
    assert read_tree(type(src)(stored.path)) == FILES
    assert not os.path.samefile(src / "model.safetensors", os.path.join(stored.path, "model.safetensors"))
    counts = persister.counts.to_dict()
    assert counts["linked"] == 0 and counts["copied"] == 1 and "linking failed" in counts["copy_reason"]


def test_storage_elsewhere_is_copied_by_ray_in_the_background_from_staged_links(tmp_path, storage_context,
                                                                                 monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    on_another_device(monkeypatch, storage_context.experiment_fs_path)
    persister = CheckpointPersister()
    args = persister.build_report_args(str(src), "checkpoint-6")
    assert args["checkpoint_upload_mode"] == ray.train.CheckpointUploadMode.ASYNC
    assert args["delete_local_checkpoint_after_upload"] and "checkpoint_upload_fn" not in args
    staged = tmp_path / "scratch" / persist.STAGING_DIR / "checkpoint-6"
    assert args["checkpoint"].path == str(staged)
    assert os.path.samefile(src / "optimizer.pt", staged / "optimizer.pt")
    # The Trainer's rotation may delete its folder before Ray's upload thread reads the staged files.
    shutil.rmtree(src)
    stored = storage_context.persist_current_checkpoint(args["checkpoint"], "checkpoint-6")
    assert read_tree(type(src)(stored.path)) == FILES
    assert persister.counts.to_dict() == {"linked": 0, "copied": 1, "copied_in_background": 1,
                                          "copy_reason": "storage is on another filesystem than the scratch folder"}


def test_a_failed_staging_falls_back_to_ray_copying_in_the_loop(tmp_path, storage_context, monkeypatch):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    on_another_device(monkeypatch, storage_context.experiment_fs_path)
    fail_link_at(monkeypatch, 2)
    persister = CheckpointPersister()
    args = persister.build_report_args(str(src), "checkpoint-6")
    assert set(args) == {"checkpoint"} and args["checkpoint"].path == str(src)  # Ray's own SYNC copy
    assert read_tree(tmp_path / "scratch" / persist.STAGING_DIR) == {}
    counts = persister.counts.to_dict()
    assert counts["copied"] == 1 and counts["copied_in_background"] == 0 and "staging failed" in counts["copy_reason"]


def test_a_node_that_does_not_see_the_storage_gets_rays_own_error(tmp_path, storage_context):
    src = make_checkpoint(tmp_path / "scratch" / "checkpoint-6")
    os.remove(os.path.join(storage_context.experiment_fs_path, VALIDATE_STORAGE_MARKER_FILENAME))
    args = CheckpointPersister().build_report_args(str(src), "checkpoint-6")
    assert set(args) == {"checkpoint"}
    with pytest.raises(RuntimeError, match="read/write access"):  # what Ray's upload raises there
        storage_context.persist_current_checkpoint(args["checkpoint"], "checkpoint-6")
