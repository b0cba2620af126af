"""A local storage folder some node of a multi-node cluster does not share is refused before
the first trial, naming the nodes; object storage and one-node clusters are not probed. The
nodes' answers are given here; tests/integration/test_shared_storage_two_nodes.py asks real nodes."""

from __future__ import annotations

import logging
import os

import pytest

from ftplat.errors import UserError
from ftplat.tune import shared_storage

TWO_NODES = [{"Alive": True, "NodeID": "a", "NodeManagerAddress": "10.0.0.1"},
             {"Alive": True, "NodeID": "b", "NodeManagerAddress": "10.0.0.2"},
             {"Alive": False, "NodeID": "c", "NodeManagerAddress": "10.0.0.3"}]


@pytest.fixture
def nodes(monkeypatch, tmp_path):
    """Two alive nodes (and a dead one); records the probe each node was asked to read."""
    asked = []

    def answer_with(answers):
        def read(path, token, *, timeout_s):
            with open(path) as f:
                asked.append((path, f.read() == token))
            return answers
        monkeypatch.setattr(shared_storage, "read_probe_on_nodes", read)

    monkeypatch.setattr(shared_storage.ray, "nodes", lambda: TWO_NODES)
    monkeypatch.setattr(shared_storage.ray, "is_initialized", lambda: True)
    return answer_with, asked


def test_a_folder_one_node_does_not_see_is_refused_naming_the_node(nodes, tmp_path):
    answer_with, asked = nodes
    answer_with([("10.0.0.1", True), ("10.0.0.2", False)])
    with pytest.raises(UserError, match=r"^storage.storage_path '.*' is a folder of this node only: 1 of the "
                                        r"cluster's 2 nodes \(10.0.0.2\) do not see .* give a folder mounted on "
                                        r"every node \(NFS\) or object storage"):
        shared_storage.check_storage_shared(str(tmp_path))
    [(path, held)] = asked
    assert held and os.path.basename(path).startswith(shared_storage.PROBE_NAME + "-")  # the probe held the token
    assert os.listdir(tmp_path) == []  # and is removed


def test_a_shared_folder_passes_and_a_silent_node_is_a_warning(nodes, tmp_path, caplog):
    answer_with, asked = nodes
    answer_with([("10.0.0.1", True), ("10.0.0.2", True)])
    shared_storage.check_storage_shared(str(tmp_path))
    answer_with([("10.0.0.1", True), ("10.0.0.2", None)])
    with caplog.at_level(logging.WARNING):
        shared_storage.check_storage_shared(str(tmp_path))
    assert "1 node(s) (10.0.0.2) did not say" in caplog.text
    assert len(asked) == 2 and os.listdir(tmp_path) == []


def test_object_storage_and_one_node_clusters_are_not_probed(monkeypatch, tmp_path):
    def never(*args, **kwargs):
        raise AssertionError("probed")

    monkeypatch.setattr(shared_storage, "read_probe_on_nodes", never)
    monkeypatch.setattr(shared_storage.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(shared_storage.ray, "nodes", lambda: TWO_NODES)
    shared_storage.check_storage_shared("s3://bucket/sweeps?endpoint_override=127.0.0.1:1")
    monkeypatch.setattr(shared_storage.ray, "nodes", lambda: TWO_NODES[:1] + TWO_NODES[2:])
    shared_storage.check_storage_shared(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_two_sweeps_starting_on_one_storage_root_do_not_read_each_others_probe(nodes, tmp_path, monkeypatch):
    """One fixed probe name: the second sweep overwrote the first's token (refused: "a folder of
    this node only") and then deleted its file (FileNotFoundError)."""
    import threading

    seen, both = [], threading.Barrier(2)

    def read(path, token, *, timeout_s):
        both.wait(timeout=10)  # both probes written before either is read
        with open(path) as f:
            seen.append(f.read() == token)
        both.wait(timeout=10)
        return [("10.0.0.1", True), ("10.0.0.2", True)]

    monkeypatch.setattr(shared_storage, "read_probe_on_nodes", read)
    errors = []

    def sweep():
        try:
            shared_storage.check_storage_shared(str(tmp_path))
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == [] and seen == [True, True] and os.listdir(tmp_path) == []
