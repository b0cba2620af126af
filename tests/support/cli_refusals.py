"""Running ``ftplat sweep`` with bad input in a subprocess, as a user would, and checking the
refusal contract: exit code 2, one line on stderr naming the field, no Ray session started,
and the storage root byte-identical before and after.

Cases run concurrently (a thread per subprocess, a few at a time) so a battery of dozens stays
within a few minutes on 2 cores; tests then assert on each recorded result.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Case:
    """One bad input: ``args`` after ``ftplat sweep`` (``{storage}``, ``{model}``, ``{data}`` and
    ``{tmp}`` are filled in), and the text the one error line must contain."""

    name: str
    args: list[str]
    names: str
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None


@dataclass
class Outcome:
    returncode: int
    stderr_lines: list[str]
    stdout: str
    ray_sessions: list[str]
    storage_before: dict[str, str]
    storage_after: dict[str, str]


def read_tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a checksum for files ('<dir>' for folders)."""
    if not root.exists():
        return {}
    out = {".": "<dir>"}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_case(case: Case, *, storage: Path, fill: dict[str, str], timeout: int = 150) -> Outcome:
    """Run one case; a case that hangs (a refusal that started a sweep after all) is killed with
    its process group and recorded as exit code -9, so one bad case fails alone."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths must stay short
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", ""),
           **{k: v.format(**fill) for k, v in case.env.items()}}
    env.pop("RAY_ADDRESS", None)
    args = [a.format(**fill) for a in case.args]
    before = read_tree(storage)
    proc = subprocess.Popen([sys.executable, "-m", "ftplat.cli.main", "sweep", *args], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(case.stdin, timeout=timeout)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        returncode, stderr = -9, f"{stderr}\n(killed after {timeout} s)"
    after = read_tree(storage)
    sessions = [p.name for p in ray_tmp.rglob("session_*")]
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return Outcome(returncode, [ln for ln in stderr.splitlines() if ln.strip()], stdout, sessions, before, after)


def run_battery(cases: list[Case], *, storage: Path, fill: dict[str, str], workers: int = 3) -> dict[str, Outcome]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {c.name: pool.submit(run_case, c, storage=storage, fill=fill) for c in cases}
        return {name: f.result() for name, f in futures.items()}


def check_refused(outcome: Outcome, case: Case) -> None:
    """The refusal contract, with the whole stderr in the message when it is broken."""
    detail = "\n".join(outcome.stderr_lines[-20:])
    assert outcome.returncode == 2, f"{case.name}: exit {outcome.returncode}\n{detail}"
    assert len(outcome.stderr_lines) == 1, f"{case.name}: {len(outcome.stderr_lines)} stderr lines\n{detail}"
    line = outcome.stderr_lines[0]
    assert line.startswith("error: ") and case.names in line, f"{case.name}: {line!r} does not name {case.names!r}"
    assert not outcome.ray_sessions, f"{case.name}: Ray started ({outcome.ray_sessions})"
    assert outcome.storage_after == outcome.storage_before, f"{case.name}: storage changed"
