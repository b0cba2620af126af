"""Train's reports reach the trial's Tune session through ftplat's channel: every report, in
order, before ``fit()``'s result, from the controller's thread in the trial driver's process,
and a run that fails or is stopped leaves no thread waiting."""

from __future__ import annotations

import pickle
import threading
import time
from types import SimpleNamespace

import pytest

from ftplat.tune.report_channel import ChannelReportCallback, ReportChannel


class ControllerInTheDriver:
    """``fit()`` as ftplat's trainers make it: the controller's callback reports from the thread
    that runs ``fit()``, in the same process."""

    def __init__(self, callback: ChannelReportCallback):
        self.callback = callback
        self.thread: str | None = None

    def fit(self):
        self.thread = threading.current_thread().name
        for step in (10, 20, 30):
            ckpt = SimpleNamespace(path=f"/runs/train-x/checkpoint-{step}") if step != 20 else None
            self.callback.after_report(None, [{"step": step, "eval_accuracy": step / 100}, {"step": step, "rank": 1}],
                                       ckpt)
        return "the run's result"


def channel_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("ftplat-train-")]


def test_every_report_arrives_in_order_before_the_result_in_the_calling_thread():
    channel = ReportChannel()
    trainer = ControllerInTheDriver(channel.build_callback())
    seen: list[tuple[dict, str]] = []

    def report(metrics):
        time.sleep(0.05)  # Tune slower than the controller: nothing may overtake a report
        seen.append((metrics, threading.current_thread().name))

    result = channel.run_fit(trainer, report=report)
    assert result == "the run's result"
    # Rank 0's metrics only, with the checkpoint's path as Ray's TuneReportCallback adds it.
    assert [m for m, _ in seen] == [
        {"step": 10, "eval_accuracy": 0.1, "checkpoint_path": "/runs/train-x/checkpoint-10"},
        {"step": 20, "eval_accuracy": 0.2},
        {"step": 30, "eval_accuracy": 0.3, "checkpoint_path": "/runs/train-x/checkpoint-30"},
    ]
    # Tune's report runs where Tune's session is, never in the controller's thread.
    assert {t for _, t in seen} == {threading.current_thread().name} and trainer.thread == "ftplat-train-fit"
    time.sleep(0.2)
    assert channel_threads() == []


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
    trainer = ControllerInTheDriver(channel.build_callback())

    def stop(metrics):
        raise SystemExit(0)

    with pytest.raises(SystemExit):
        channel.run_fit(trainer, report=stop)


def test_a_copy_in_another_process_carries_no_queue_and_refuses_to_report():
    """Train sends its run config, callbacks included, to every worker: the callback pickles,
    and a copy that was ever asked to report would say where the controller must run."""
    copy = pickle.loads(pickle.dumps(ReportChannel().build_callback()))
    assert isinstance(copy, ChannelReportCallback) and copy._events is None
    with pytest.raises(RuntimeError, match="controller must run there"):
        copy.after_report(None, [{"step": 1}], None)
