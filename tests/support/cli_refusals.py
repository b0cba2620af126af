"""Running ``ftplat sweep`` with bad input in a subprocess, as a user would, and checking the
refusal contract: exit code 2, one line on stderr naming the field, no Ray session started,
and the storage root byte-identical before and after.

A battery of cases runs in children of one fork server (``cli_forkserver.py``), a few at a
time: each case is still its own process running the real ``ftplat`` entry point, but torch,
transformers and Ray are imported once for all of them instead of once per case. ``run_case``
runs one case as a plain ``python -m ftplat.cli.main`` subprocess, which the tests compare
the server's outcome with. Tests then assert on each recorded result.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORKSERVER = Path(__file__).with_name("cli_forkserver.py")


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
    ray_tmp = build_ray_tmp()
    env = {**os.environ, **build_case_env(case, fill, ray_tmp)}
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
    return read_outcome(returncode, stdout, stderr, ray_tmp, before, read_tree(storage))


def build_ray_tmp() -> Path:
    """A case's own RAY_TMPDIR, where a Ray session it started would show."""
    return Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths must stay short


def read_outcome(returncode: int, stdout: str, stderr: str, ray_tmp: Path, before: dict, after: dict) -> Outcome:
    """A finished case's record; its RAY_TMPDIR is removed once read."""
    sessions = [p.name for p in ray_tmp.rglob("session_*")]
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return Outcome(returncode, [ln for ln in stderr.splitlines() if ln.strip()], stdout, sessions, before, after)


def build_case_env(case: Case, fill: dict[str, str], ray_tmp: Path) -> dict[str, str]:
    """What a case sets on top of the test process's environment."""
    return {"RAY_TMPDIR": str(ray_tmp), "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", ""),
            **{k: v.format(**fill) for k, v in case.env.items()}}


def run_battery(cases: list[Case], *, storage: Path, fill: dict[str, str], workers: int = 3,
                timeout: int = 150) -> dict[str, Outcome]:
    """Every case in a child of one fork server, ``workers`` at a time. The server's
    environment holds what all cases set alike (read at import time by some libraries); each
    child adds its own. A case that hangs is killed with its process group after ``timeout``
    seconds and recorded as exit code -9, so one bad case fails alone."""
    common = dict(set.intersection(*[set(c.env.items()) for c in cases])) if cases else {}
    env = {**os.environ, "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", ""),
           **{k: v.format(**fill) for k, v in common.items()}}
    env.pop("RAY_ADDRESS", None)
    scratch = Path(tempfile.mkdtemp(prefix="refusals-"))
    server = subprocess.Popen([sys.executable, str(FORKSERVER)], cwd=REPO, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, start_new_session=True)
    replies = ReplyReader(server)
    try:
        assert next(replies.read(600)) == {"ready": True}, "the fork server did not start"
        queue, active, results = list(cases), {}, {}
        while queue or active:
            while queue and len(active) < workers:
                case = queue.pop(0)
                ray_tmp = build_ray_tmp()
                files = {name: scratch / f"{case.name}.{name}" for name in ("stdin", "stdout", "stderr")}
                files["stdin"].write_text(case.stdin or "")
                request = {"id": case.name, "argv": ["sweep", *[a.format(**fill) for a in case.args]],
                           "env": build_case_env(case, fill, ray_tmp), "cwd": str(REPO),
                           **{name: str(path) for name, path in files.items()}}
                active[case.name] = {"before": read_tree(storage), "started": time.monotonic(), "pid": None,
                                     "ray_tmp": ray_tmp, "files": files, "killed": False}
                server.stdin.write((json.dumps(request) + "\n").encode())
                server.stdin.flush()
            for message in replies.read(1.0):
                if "pid" in message:
                    active[message["id"]]["pid"] = message["pid"]
                    continue
                state = active.pop(message["id"])
                stderr = state["files"]["stderr"].read_text()
                if state["killed"]:
                    stderr += f"\n(killed after {timeout} s)"
                results[message["id"]] = read_outcome(message["returncode"], state["files"]["stdout"].read_text(),
                                                      stderr, state["ray_tmp"], state["before"], read_tree(storage))
            for state in active.values():
                if state["pid"] and not state["killed"] and time.monotonic() - state["started"] > timeout:
                    os.killpg(state["pid"], signal.SIGKILL)
                    state["killed"] = True
        return results
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        shutil.rmtree(scratch, ignore_errors=True)


class ReplyReader:
    """The fork server's reply lines, read as they arrive."""

    def __init__(self, server: subprocess.Popen):
        self.server, self.pending = server, b""

    def read(self, wait: float):
        """The complete lines that are in, after waiting up to ``wait`` seconds for more."""
        if b"\n" not in self.pending and select.select([self.server.stdout], [], [], wait)[0]:
            chunk = os.read(self.server.stdout.fileno(), 65536)
            assert chunk, f"the fork server exited ({self.server.poll()})"
            self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            yield json.loads(line)


def check_refused(outcome: Outcome, case: Case) -> None:
    """The refusal contract, with the whole stderr in the message when it is broken."""
    detail = "\n".join(outcome.stderr_lines[-20:])
    assert outcome.returncode == 2, f"{case.name}: exit {outcome.returncode}\n{detail}"
    assert len(outcome.stderr_lines) == 1, f"{case.name}: {len(outcome.stderr_lines)} stderr lines\n{detail}"
    line = outcome.stderr_lines[0]
    assert line.startswith("error: ") and case.names in line, f"{case.name}: {line!r} does not name {case.names!r}"
    assert not outcome.ray_sessions, f"{case.name}: Ray started ({outcome.ray_sessions})"
    assert outcome.storage_after == outcome.storage_before, f"{case.name}: storage changed"
