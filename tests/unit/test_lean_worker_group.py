"""The lean controller's worker group (``ray_internals.lean_worker_group``): Train's worker with
its end seen at the poll that takes its last report, and the synchronization actor swapped out
for one worker only. The polls run Ray's own worker, thread runner and result queue."""

import queue
import threading
import time
import types

import pytest
from ray.train.v2._internal.execution.checkpoint.sync_actor import SynchronizationActor
from ray.train.v2._internal.execution.worker_group import worker as train_worker
from ray.train.v2._internal.execution.worker_group import worker_group
from ray.train.v2._internal.execution.worker_group.thread_runner import ThreadRunner

from ftplat.ray_internals.lean_worker_group import RayTrainWorker, build_lean_worker_group_class


@pytest.fixture
def run_function(monkeypatch):
    """Start ``fn`` as Train starts a worker's function (its thread runner, its one-slot result
    queue, which ``report`` fills); the train context the worker's polls read."""

    def start(fn):
        results = queue.Queue(maxsize=1)  # Train's: a report waits until a poll takes the last
        runner = ThreadRunner()
        context = types.SimpleNamespace(
            execution_context=types.SimpleNamespace(result_queue=results, training_thread_runner=runner),
            preemption_context=types.SimpleNamespace(preemption_info=None))
        monkeypatch.setattr(train_worker, "get_train_context", lambda: context)
        runner.run(lambda: fn(results.put))
        return runner

    return start


def _wait_until_ended(runner, timeout=10.0):
    deadline = time.monotonic() + timeout
    while runner.is_running():
        assert time.monotonic() < deadline, "the function's thread did not end"
        time.sleep(0.01)


def _polls(worker, n):
    return [(s.running, s.training_report, s.return_value, s.error) for s in (worker.poll_status() for _ in range(n))]


def test_the_lean_group_runs_ftplats_worker_under_trains_name():
    assert build_lean_worker_group_class()._worker_cls is RayTrainWorker
    assert issubclass(RayTrainWorker, train_worker.RayTrainWorker)
    # The dashboard's Actors page and the process titles (ray::RayTrainWorker) stay Train's.
    assert RayTrainWorker.__name__ == train_worker.RayTrainWorker.__name__


@pytest.mark.parametrize("worker, polls_to_end", [(train_worker.RayTrainWorker, 2), (RayTrainWorker, 1)])
def test_a_function_that_ends_with_a_report_ends_at_the_poll_that_takes_it(run_function, worker, polls_to_end):
    """Train's worker needs one more poll after the one carrying the last report; ftplat's
    says it has finished in that poll, with the same report and return value."""
    def fn(report):
        report("metrics and checkpoint of the last step")
        return "done"

    runner = run_function(fn)
    _wait_until_ended(runner)
    polls = _polls(worker(), 3)
    assert polls[0][1] == "metrics and checkpoint of the last step"
    running, _, returned, error = polls[polls_to_end - 1]
    assert (running, returned, error) == (False, "done", None)
    assert [p[0] for p in polls] == [True] * (polls_to_end - 1) + [False] * (4 - polls_to_end)
    assert [p[1] for p in polls[1:]] == [None, None]  # nothing taken twice


def test_a_running_function_is_running_whatever_its_polls_carry(run_function):
    go_on, reported = threading.Event(), threading.Event()

    def fn(report):
        report("epoch 1")
        reported.set()
        go_on.wait(10)
        report("epoch 2")
        return "done"

    runner = run_function(fn)
    worker = RayTrainWorker()
    assert reported.wait(10)
    assert _polls(worker, 2) == [(True, "epoch 1", None, None), (True, None, None, None)]
    go_on.set()
    _wait_until_ended(runner)
    assert _polls(worker, 2) == [(False, "epoch 2", "done", None), (False, None, "done", None)]


def test_a_function_that_fails_after_a_report_gives_both_in_one_poll(run_function):
    def fn(report):
        report("epoch 1")
        raise RuntimeError("out of memory")

    runner = run_function(fn)
    _wait_until_ended(runner)
    [(running, report, _, error)] = _polls(RayTrainWorker(), 1)
    assert (running, report) == (False, "epoch 1")
    assert "out of memory" in str(error)


@pytest.mark.parametrize("num_workers, solo", [(1, True), (2, False)])
def test_the_lean_worker_group_swaps_for_one_worker_only(monkeypatch, num_workers, solo):
    """Start, shutdown and abort each run inside the swap for one worker, outside it for two."""
    lean = build_lean_worker_group_class()
    seen = []
    for name in ("_start", "shutdown", "abort"):
        monkeypatch.setattr(worker_group.WorkerGroup, name,
                            lambda self, name=name: seen.append((name, worker_group.SynchronizationActor)))
    group = object.__new__(lean)
    group._worker_group_context = type("Context", (), {"num_workers": num_workers})()
    group._start()
    group.shutdown()
    group.abort()
    assert [name for name, _ in seen] == ["_start", "shutdown", "abort"]
    assert all((actor is not SynchronizationActor) == solo for _, actor in seen)
