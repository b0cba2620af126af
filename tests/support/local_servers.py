"""Server processes the integration tests talk to (a moto S3 server, an `mlflow server`):
started on a free 127.0.0.1 port, waited for, and always stopped."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def find_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int, health_path: str | None) -> bool:
    try:
        if health_path is None:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        else:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{health_path}", timeout=2)
        return True
    except OSError:
        return False


@contextmanager
def run_server_process(argv: list[str], port: int, log_path: Path, *, start_timeout_s: float,
                       health_path: str | None = None) -> Iterator[str]:
    """Run ``argv`` (which must listen on ``port``) until the block ends; yield its base URL.

    Ready when the port accepts connections, or when ``health_path`` answers over HTTP (a
    server can listen before its app is loaded). A server that exits or stays silent fails
    with the tail of its log, which the test output would otherwise not show.
    """
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + start_timeout_s
            while not _answers(port, health_path):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{argv[:3]} did not start on port {port}:\n{tail}")
                time.sleep(0.2)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def run_moto_s3_in_threads(monkeypatch) -> Iterator[object]:
    """A moto S3 server in this process (threads, a free port), with the AWS variables pyarrow
    and boto3 read pointed at it; yields a boto3 S3 client. Skips when moto is missing."""
    import pytest

    server_mod = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
            monkeypatch.setenv(key, value)
        yield boto3.client("s3")
    finally:
        server.stop()
