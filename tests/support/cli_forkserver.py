"""A process that imports the ``ftplat`` CLI's heavy modules once and forks a fresh child for
each command it is asked to run, so a battery of refusal cases pays torch, transformers and
Ray's imports once instead of once per case (about 8 s of a core each on 2 cores).

Each child is what ``python -m ftplat.cli.main ARGS`` would be from there on: its own process
and session, the case's environment, cwd, stdin, stdout and stderr files, and the exit status
the interpreter would give (``SystemExit`` codes, 1 with a traceback on an uncaught exception,
atexit handlers run). What differs is only that the imports were done before the arguments
were read. Variables read at import time must therefore be in the server's own environment:
``run_forkserver`` is given the environment common to all cases (``HF_HUB_OFFLINE``, which
huggingface_hub reads once, is one).

Protocol, one JSON object per line. Requests on stdin:
``{"id", "argv", "env", "cwd", "stdin", "stdout", "stderr"}`` (the last three file paths).
Replies on stdout: ``{"ready": true}`` once the imports are done, then ``{"id", "pid"}`` when a
child starts and ``{"id", "returncode"}`` when it ends (negative: killed by that signal).
"""

from __future__ import annotations

import json
import os
import select
import sys
import traceback

#: The heavy modules a sweep's pre-flight imports (torch, transformers, Ray Tune). Not
#: ``datasets``: the CLI sets HF_DATASETS_DISABLE_PROGRESS_BARS before importing it, and a
#: preloaded ``datasets`` would have read the variable already (about 1 s, paid per case).
PRELOAD = ("ftplat.cli.main", "ftplat.cli.sweep", "ftplat.tune.sweep", "ftplat.train.modeling")


def run_child(request: dict) -> None:
    """In the forked child: become the command, then leave with its exit status."""
    code = 1
    try:
        os.setsid()  # a timed-out case is killed with its process group
        os.close(REPLIES.fileno())
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        for fd, (path, flags) in enumerate([(request["stdin"], os.O_RDONLY),
                                            (request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                            (request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)]):
            os.dup2(os.open(path, flags, 0o644), fd)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        sys.argv = ["ftplat", *request["argv"]]
        from ftplat.cli.main import main

        try:
            code = main(request["argv"])
        except SystemExit as exc:  # what the interpreter does with sys.exit's argument
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code if isinstance(code, int) else 1)


#: The reply channel: the server's stdout as it started. Its fd 1 then points at its stderr,
#: so whatever an import prints cannot break the protocol.
REPLIES = None


def reply(message: dict) -> None:
    REPLIES.write(json.dumps(message) + "\n")
    REPLIES.flush()


def serve() -> None:
    """Single-threaded on purpose: forking a process with other threads running can copy a
    lock some thread holds."""
    global REPLIES
    import importlib

    REPLIES = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for name in PRELOAD:
        importlib.import_module(name)
    reply({"ready": True})
    running: dict[int, str] = {}
    pending = b""
    open_input = True
    while open_input or running:
        if open_input and select.select([0], [], [], 0.05)[0]:
            chunk = os.read(0, 65536)
            open_input = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    run_child(request)
                running[pid] = request["id"]
                reply({"id": request["id"], "pid": pid})
        elif not open_input:
            select.select([], [], [], 0.05)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply({"id": running.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
