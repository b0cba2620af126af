"""Several Ray clusters on one host (parallel test sessions, a benchmark beside a sweep): Ray's
own processes must still find their own cluster, or Train V2's PlacementGroupCleaner takes a
live trial's controller for dead and removes the trial's placement group mid-training."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PROBE = Path(__file__).resolve().parents[1] / "support" / "state_probe.py"


def _probe(mode: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, str(PROBE), mode], capture_output=True, text=True, timeout=240, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("found", "error"))]
    assert lines, out.stdout[-2000:] + out.stderr[-3000:]
    return lines[-1]


def test_a_private_cluster_finds_its_own_actors_beside_another_cluster():
    assert _probe("pinned") == "found"
    # what ray.init(address="local") alone gives, which the line above must not
    assert _probe("plain").startswith("error")
