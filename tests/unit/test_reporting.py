"""What each evaluation report carries: fresh metrics and the running scope objective."""

import pytest

from ftplat.records import OBJECTIVE_KEY
from ftplat.scoring import build_report_metrics
from ftplat.scoring import SCOPES, compute_scope_scores


def build_log_history(accuracies):
    history, step = [], 0
    for acc in accuracies:
        step += 10
        history.append({"loss": 1.0 / step, "learning_rate": 1e-5, "epoch": step / 10, "step": step})
        history.append({"eval_accuracy": acc, "eval_loss": 1 - acc, "eval_f1": acc, "epoch": step / 10, "step": step})
    return history


@pytest.mark.parametrize("scope", SCOPES)
def test_objective_is_the_running_scope_score(scope):
    accs = [0.6, 0.8, 0.7, 0.75, 0.5, 0.9, 0.65]
    log = build_log_history(accs)
    for n in range(1, len(accs) + 1):
        upto = log[: 2 * n]
        m = build_report_metrics(upto, metric="eval_accuracy", mode="max", scope=scope, step=10 * n)
        assert m[OBJECTIVE_KEY] == pytest.approx(compute_scope_scores(accs[:n], "max")[scope])
        # the evaluation that just ran, never a stale one
        assert m["eval_accuracy"] == accs[n - 1]
        assert m["num_evaluations"] == n and m["checkpoint_name"] == f"checkpoint-{10 * n}"


def test_report_carries_train_loss_and_no_non_eval_noise():
    m = build_report_metrics(build_log_history([0.5, 0.6]), metric="eval_loss", mode="min", scope="all", step=20)
    assert m[OBJECTIVE_KEY] == pytest.approx(0.4)
    assert m["train_loss"] == pytest.approx(1 / 20)
    assert "learning_rate" not in m


def test_history_restores_evaluations_tune_lost_on_restart():
    from ftplat.tune.summary import build_trial_history

    tune_rows = [{"training_iteration": 1, "step": 128, "epoch": 2.0, "eval_accuracy": 0.6},
                 {"training_iteration": 2, "step": 192, "epoch": 3.0, "eval_accuracy": 0.7}]
    trainer = [{"step": 64, "epoch": 1.0, "eval_accuracy": 0.5}, {"step": 128, "epoch": 2.0, "eval_accuracy": 0.6},
               {"step": 192, "epoch": 3.0, "eval_accuracy": 0.7}]
    rows = build_trial_history(tune_rows, trainer)
    assert [(r["training_iteration"], r["epoch"]) for r in rows] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert rows[0]["checkpoint_name"] == "checkpoint-64" and rows[0]["source"] == "trainer_state"
    assert build_trial_history(tune_rows, trainer[1:]) == tune_rows
    # a step reported twice (a restarted trial repeats what a crash rolled back) counts once, the later report
    again = {**tune_rows[1], "training_iteration": 1, "eval_accuracy": 0.75}
    assert build_trial_history([*tune_rows, again]) == [tune_rows[0], {**again, "training_iteration": 2}]


def test_a_run_restored_at_its_last_checkpoint_reports_its_last_evaluation_again(monkeypatch):
    """Killed after its last checkpoint's report, a trial resumes with nothing left to train:
    without a report Tune would end it with no score (its progress table then fails to sort)."""
    import ray.train
    from transformers import TrainerState

    from ftplat.records import CHECKPOINT_NAME_KEY
    from ftplat.train.reporting import RayScopeReportCallback

    reports = []
    monkeypatch.setattr(ray.train, "report", lambda metrics, **kw: reports.append((metrics, kw)))
    state = TrainerState(global_step=30, log_history=build_log_history([0.5, 0.7, 0.6]))
    callback = RayScopeReportCallback(metric="eval_accuracy", mode="max", scope="last", local_rank=0)
    callback.on_train_end(None, state, None)
    (metrics, kw), = reports
    assert kw == {} and metrics["step"] == 30 and metrics[CHECKPOINT_NAME_KEY] == "checkpoint-30"
    assert metrics["eval_accuracy"] == 0.6 and metrics[OBJECTIVE_KEY] == 0.6 and metrics["num_evaluations"] == 3

    # A run that saved reported each evaluation already; one that never evaluated has nothing to say.
    callback.saves = 1
    callback.on_train_end(None, state, None)
    fresh = RayScopeReportCallback(metric="eval_accuracy", mode="max", scope="last", local_rank=0)
    fresh.on_train_end(None, TrainerState(global_step=5, log_history=[{"loss": 0.7, "step": 5}]), None)
    assert len(reports) == 1
