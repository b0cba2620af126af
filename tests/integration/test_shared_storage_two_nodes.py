"""The shared-storage probe on a real two-node Ray cluster (``ray.cluster_utils.Cluster``,
started in a child process with its own GCS port, so the session's cluster is not touched):
a task pinned to each node reads the file the driver wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, os, socket, sys
    import ray
    from ray.cluster_utils import Cluster
    from ftplat.tune.shared_storage import PROBE_NAME, check_storage_shared, read_probe_on_nodes

    folder = sys.argv[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "gcs_server_port": port, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, logging_level="WARNING")
        probe = os.path.join(folder, "probe")
        with open(probe, "w") as f:
            f.write("token")
        seen = read_probe_on_nodes(probe, "token", timeout_s=120)
        wrong = read_probe_on_nodes(probe, "another", timeout_s=120)
        os.remove(probe)
        check_storage_shared(folder, timeout_s=120)
        print(json.dumps({"seen": seen, "wrong": wrong, "left": os.listdir(folder),
                          "nodes": len([n for n in ray.nodes() if n["Alive"]])}))
    finally:
        ray.shutdown()
        cluster.shutdown()
""")


def test_each_node_of_a_two_node_cluster_reads_the_probe(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "platform"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["nodes"] == 2
    assert [sees for _, sees in result["seen"]] == [True, True]
    assert [sees for _, sees in result["wrong"]] == [False, False]
    assert result["left"] == []  # the shared folder passed and its probe is gone
