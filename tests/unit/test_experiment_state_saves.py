"""Tune saves the state ``--resume`` restores from in the step a trial is added or ends, not up to
10 s later: checked against Tune's own experiment checkpoint manager and controller views."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune.execution.experiment_state import _ExperimentCheckpointManager
from ray.tune.execution.tune_controller import TrialRunnerWrapper
from ray.tune.experiment import Trial

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.spaces import build_scheduler


def build_manager(tmp_path) -> _ExperimentCheckpointManager:
    # Tune's storage context needs a Ray session for its staging folder; the manager only
    # hands that folder to the syncer.
    storage = SimpleNamespace(experiment_driver_staging_path=str(tmp_path / "staging"),
                              experiment_fs_path=str(tmp_path / "sweep"),
                              syncer=SimpleNamespace(sync_up=lambda *a, **k: True, wait=lambda: None))
    return _ExperimentCheckpointManager(storage=storage, checkpoint_period="auto")


@pytest.mark.parametrize("scheduler_type", ["fifo", "asha"])
def test_every_trial_event_saves_the_state_at_the_end_of_its_step(tmp_path, scheduler_type):
    asha = ["search.scheduler.max_t=3", "search.scheduler.grace_period=1"] if scheduler_type == "asha" else []
    job, space = load_sweep_configs(None, None, [f"search.scheduler.type={scheduler_type}", *asha])
    scheduler = build_scheduler(space, job)
    scheduler.set_search_properties("objective", "max")
    manager = build_manager(tmp_path)
    controller = SimpleNamespace(_checkpoint_manager=manager)
    saves = []

    def step_end():  # what TuneController.step does last
        manager.sync_up_experiment_state(save_fn=lambda: saves.append(1))

    step_end()
    assert len(saves) == 1  # the first step saves; the next would wait 10 s
    step_end()
    assert len(saves) == 1

    trials = [Trial("fn", trial_id=f"t{i}", stub=True, config={}) for i in range(2)]
    # a trial is added with the restricted view Tune gives schedulers, and ends with the controller
    for trial in trials:
        scheduler.on_trial_add(TrialRunnerWrapper(controller, trial_executor=None), trial)
    step_end()
    assert len(saves) == 2
    scheduler.on_trial_complete(controller, trials[0], {"training_iteration": 3, "objective": 0.5})
    step_end()
    assert len(saves) == 3
    scheduler.on_trial_error(controller, trials[1])
    step_end()
    assert len(saves) == 4
    step_end()  # nothing happened since: the period applies again
    assert len(saves) == 4
