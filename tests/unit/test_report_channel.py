"""Train's reports reach the trial's Tune session through ftplat's loopback channel: every
report, in order, before ``fit()``'s result, from another process as from Train's controller,
and a run that fails or is stopped leaves no thread waiting."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
import threading
import time

import pytest

from ftplat.tune.report_channel import ChannelReportCallback, ReportChannel

SENDER = """
import base64, pickle, sys
from types import SimpleNamespace
callback = pickle.loads(base64.b64decode(sys.argv[1]))
for step in (10, 20, 30):
    ckpt = SimpleNamespace(path=f"/runs/train-x/checkpoint-{step}") if step != 20 else None
    callback.after_report(None, [{"step": step, "eval_accuracy": step / 100}, {"step": step, "rank": 1}], ckpt)
"""


class ControllerInAnotherProcess:
    """``fit()`` as Train's controller makes it: the pickled callback reports from another process."""

    def __init__(self, callback: ChannelReportCallback):
        self.payload = base64.b64encode(pickle.dumps(callback)).decode()

    def fit(self):
        subprocess.run([sys.executable, "-c", SENDER, self.payload], check=True, timeout=120)
        return "the run's result"


def channel_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("ftplat-train-")]


def test_every_report_arrives_in_order_before_the_result():
    channel = ReportChannel()
    trainer = ControllerInAnotherProcess(channel.build_callback())
    seen: list[dict] = []
    result = channel.run_fit(trainer, report=lambda m: seen.append(m))
    assert result == "the run's result"
    # Rank 0's metrics only, with the checkpoint's path as Ray's TuneReportCallback adds it.
    assert seen == [
        {"step": 10, "eval_accuracy": 0.1, "checkpoint_path": "/runs/train-x/checkpoint-10"},
        {"step": 20, "eval_accuracy": 0.2},
        {"step": 30, "eval_accuracy": 0.3, "checkpoint_path": "/runs/train-x/checkpoint-30"},
    ]
    time.sleep(0.2)
    assert channel_threads() == []


def test_a_report_waits_for_the_drivers_receipt():
    """The controller's report returns only once the driver has taken it: what makes every
    report arrive before fit()'s result."""
    channel = ReportChannel()
    callback = channel.build_callback()
    sending = threading.Thread(target=callback.after_report, args=(None, [{"step": 1}], None))
    sending.start()
    sending.join(0.5)
    assert sending.is_alive()  # connected and sent, no receipt while nothing reads

    class Joining:
        def fit(self):
            sending.join(30)
            return "done" if not sending.is_alive() else "still waiting"

    seen: list[dict] = []
    assert channel.run_fit(Joining(), report=seen.append) == "done"
    assert seen == [{"step": 1}]


def test_a_failed_run_raises_in_the_caller_and_leaves_no_thread():
    class Failing:
        def fit(self):
            raise ValueError("the controller gave up")

    channel = ReportChannel()
    channel.build_callback()
    with pytest.raises(ValueError, match="the controller gave up"):
        channel.run_fit(Failing(), report=lambda m: pytest.fail("no report was made"))
    time.sleep(0.2)
    assert channel_threads() == []


def test_a_stop_from_tune_during_a_report_ends_the_wait():
    """Tune stops a trial by raising SystemExit in the reporting thread."""
    channel = ReportChannel()
    trainer = ControllerInAnotherProcess(channel.build_callback())

    def stop(metrics):
        raise SystemExit(0)

    with pytest.raises(SystemExit):
        channel.run_fit(trainer, report=stop)


def test_the_callback_pickles_without_its_connection():
    callback = ReportChannel().build_callback()
    callback._conn = object()  # a live connection never crosses processes
    copy = pickle.loads(pickle.dumps(callback))
    assert copy._conn is None and copy.address == callback.address and copy.authkey == callback.authkey
