"""Search-space conversion to Tune/Optuna, the scheduler, and the HF arguments."""

import math
from types import SimpleNamespace

import optuna
import pytest
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search.optuna import OptunaSearch

from ftplat.config.loading import load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.train.arguments import build_training_arguments
from ftplat.tune.spaces import (
    FullLengthASHAScheduler,
    build_max_evaluations,
    build_param_space,
    build_scheduler,
    build_search_alg,
)

SPACE = {
    "parameters": {
        "training.learning_rate": {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-3},
        "training.warmup_steps": {"type": "uniform", "low": 0.0, "high": 0.2},
        "training.gradient_accumulation_steps": {"type": "int", "low": 1, "high": 4},
        "training.lr_scheduler_type": {"type": "choice", "values": ["linear", "cosine"]},
    }
}


def test_tune_domains_have_the_configured_bounds():
    space = SearchSpaceConfig.model_validate(SPACE)
    params = build_param_space(space)
    lr = params["training.learning_rate"]
    assert (lr.lower, lr.upper) == (1.0e-5, 1.0e-3) and type(lr.get_sampler()).__name__ == "_LogUniform"
    assert (params["training.warmup_steps"].lower, params["training.warmup_steps"].upper) == (0.0, 0.2)
    # Tune's randint excludes its upper bound; the config's high is inclusive.
    assert params["training.gradient_accumulation_steps"].upper == 5
    assert params["training.lr_scheduler_type"].categories == ["linear", "cosine"]


def test_optuna_receives_the_same_distributions():
    space = SearchSpaceConfig.model_validate(SPACE)
    dists = OptunaSearch.convert_search_space(build_param_space(space))
    lr = dists["training.learning_rate"]
    assert isinstance(lr, optuna.distributions.FloatDistribution) and lr.log
    assert (lr.low, lr.high) == (1.0e-5, 1.0e-3)
    ga = dists["training.gradient_accumulation_steps"]
    assert isinstance(ga, optuna.distributions.IntDistribution) and (ga.low, ga.high) == (1, 4)
    assert dists["training.lr_scheduler_type"].choices == ("linear", "cosine")


def test_seeded_optuna_proposes_the_same_trials():
    def propose(seed):
        space = SearchSpaceConfig.model_validate({**SPACE, "seed": seed})
        alg = build_search_alg(space, max_concurrent=3)
        alg.set_search_properties("objective", "max", build_param_space(space))
        return [alg.suggest(f"t{i}") for i in range(3)]

    assert propose(0) == propose(0)
    assert propose(0) != propose(1)


def test_points_to_evaluate_come_first():
    space = SearchSpaceConfig.model_validate(
        {"parameters": {"training.learning_rate": {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-3}},
         "points_to_evaluate": [{"training.learning_rate": 2.0e-5}]}
    )
    alg = build_search_alg(space, max_concurrent=1)
    alg.set_search_properties("objective", "max", build_param_space(space))
    assert alg.suggest("t0") == {"training.learning_rate": 2.0e-5}


def test_schedulers():
    job = JobConfig()
    assert isinstance(build_scheduler(SearchSpaceConfig(), job), FIFOScheduler)
    asha = build_scheduler(SearchSpaceConfig.model_validate({"scheduler": {"type": "asha", "grace_period": 1}}), job)
    assert isinstance(asha, ASHAScheduler) and asha._max_t == 3  # one rung unit per evaluation
    steps_job = JobConfig.model_validate({"training": {"max_steps": 100, "eval_strategy": "steps", "eval_steps": 25,
                                                       "save_strategy": "steps"}})
    assert build_max_evaluations(steps_job) == 4
    with pytest.raises(ValueError, match="grace_period"):
        build_scheduler(SearchSpaceConfig.model_validate({"scheduler": {"type": "asha", "grace_period": 5}}), job)


def _count_hf_evaluations(job: JobConfig, output_dir, n_train: int = 16) -> int:
    """Train a two-weight model with ftplat's TrainingArguments and count the evaluations
    the Trainer makes (each one followed by a save, as in every trial)."""
    import torch
    from tiny_assets import build_two_weight_classifier, build_two_weight_rows
    from transformers import Trainer, TrainerCallback

    class Counter(TrainerCallback):
        evaluations = saves = 0

        def on_evaluate(self, args, state, control, **kwargs):
            Counter.evaluations += 1

        def on_save(self, args, state, control, **kwargs):
            Counter.saves += 1

    rows = build_two_weight_rows(n_train)
    torch.manual_seed(0)
    trainer = Trainer(model=build_two_weight_classifier(), args=build_training_arguments(job, output_dir=str(output_dir)),
                      train_dataset=rows, eval_dataset=rows[:4], callbacks=[Counter()])
    trainer.train()
    assert Counter.saves == Counter.evaluations
    return Counter.evaluations


@pytest.mark.parametrize("training", [
    {"max_steps": 7, "eval_strategy": "steps", "eval_steps": 2, "save_strategy": "steps"},
    {"max_steps": 6, "eval_strategy": "steps", "eval_steps": 3, "save_strategy": "steps"},
    {"max_steps": 3, "eval_strategy": "steps", "eval_steps": 5, "save_strategy": "steps"},
    {"num_train_epochs": 2.5},
    {"num_train_epochs": 0.3},
])
def test_max_evaluations_is_what_the_trainer_makes(training, tmp_path):
    """transformers also evaluates (and saves) at the last step when it is no multiple of
    eval_steps, and after the partial last epoch of a fractional num_train_epochs."""
    job = JobConfig.model_validate({"training": {"per_device_train_batch_size": 4, "logging_steps": 1,
                                                 "metric_for_best_model": "loss", **training}})
    assert build_max_evaluations(job) == _count_hf_evaluations(job, tmp_path)


class _Trial:
    def __init__(self, trial_id):
        self.trial_id = trial_id


def _run_asha(scheduler, rewards: dict[str, list[float]]) -> tuple[list[tuple[str, int, str]], list]:
    """Feed each trial's objective per evaluation as Tune does (round robin, on_trial_complete
    once a trial stops or runs out); return the decisions and the rungs' records."""
    scheduler.set_search_properties("objective", "max")
    trials = {tid: _Trial(tid) for tid in rewards}
    # ftplat's schedulers ask the controller for a state save on trial events (what it saves:
    # test_experiment_state_saves); Ray's ignore it.
    controller = SimpleNamespace(_checkpoint_manager=SimpleNamespace(_should_force_sync_up=False))
    for trial in trials.values():
        scheduler.on_trial_add(controller, trial)
    decisions, live = [], dict.fromkeys(rewards)
    for it in range(1, max(len(r) for r in rewards.values()) + 1):
        for tid in list(live):
            result = {"training_iteration": it, "num_evaluations": it, "objective": rewards[tid][it - 1]}
            decision = scheduler.on_trial_result(controller, trials[tid], result)
            decisions.append((tid, it, decision))
            if decision == TrialScheduler.STOP or it == len(rewards[tid]):
                scheduler.on_trial_complete(controller, trials[tid], result)
                del live[tid]
    return decisions, [(milestone, dict(recorded)) for milestone, recorded in scheduler._brackets[0]._rungs]


def test_full_length_trials_are_never_stopped_and_the_rungs_stay_rays():
    rewards = {"a": [0.9, 0.9, 0.9, 0.9], "b": [0.5, 0.6, 0.7, 0.8], "c": [0.95, 0.2, 0.3, 0.4],
               "d": [0.92, 0.95, 0.95, 0.99]}
    space = SearchSpaceConfig.model_validate({"scheduler": {"type": "asha", "grace_period": 1, "max_t": 4}})
    ours, our_rungs = _run_asha(build_scheduler(space, JobConfig()), rewards)
    rays, ray_rungs = _run_asha(ASHAScheduler(time_attr="training_iteration", max_t=4, grace_period=1,
                                              reduction_factor=2), rewards)
    assert isinstance(build_scheduler(space, JobConfig()), FullLengthASHAScheduler)
    assert our_rungs == ray_rungs and [m for m, _ in our_rungs] == [4, 2, 1]
    assert set(our_rungs[0][1]) == {"a", "d"}  # the max_t rung records the trials that got there
    # Ray stops every trial at max_t; ftplat lets it finish, and decides as Ray everywhere else.
    assert [d for d in rays if d[1] == 4] == [(t, 4, TrialScheduler.STOP) for t in ("a", "d")]
    assert [d for d in ours if d[1] == 4] == [(t, 4, TrialScheduler.CONTINUE) for t in ("a", "d")]
    assert [d for d in ours if d[1] < 4] == [d for d in rays if d[1] < 4]
    assert (("b", 1, TrialScheduler.STOP) in ours) and (("c", 2, TrialScheduler.STOP) in ours)


def test_a_trial_is_never_stopped_at_its_final_evaluation_whatever_its_length():
    """Searched epochs: b's 2 evaluations are its whole run, below max_t (the job's 3); the rung
    at 2 would stop it there, killing it before it loads its best model and writes its record."""
    space = SearchSpaceConfig.model_validate({"scheduler": {"type": "asha", "grace_period": 1, "max_t": 3,
                                                            "reduction_factor": 2}})
    controller = SimpleNamespace(_checkpoint_manager=SimpleNamespace(_should_force_sync_up=False))

    def run(final_flag: bool) -> str:
        scheduler = build_scheduler(space, JobConfig())
        scheduler.set_search_properties("objective", "max")
        trials = {tid: _Trial(tid) for tid in "acdb"}
        for trial in trials.values():
            scheduler.on_trial_add(controller, trial)
        for n in (1, 2):
            for tid in "acd":
                scheduler.on_trial_result(controller, trials[tid], {"num_evaluations": n, "objective": 0.9})
            decision = scheduler.on_trial_result(controller, trials["b"], {
                "num_evaluations": n, "objective": 0.95 if n == 1 else 0.1,
                **({"final_evaluation": True} if final_flag and n == 2 else {})})
            if n == 1:
                assert decision == TrialScheduler.CONTINUE
        return decision

    assert run(final_flag=False) == TrialScheduler.STOP  # Ray's rung, for a trial with more to run
    assert run(final_flag=True) == TrialScheduler.CONTINUE


def test_asha_counts_evaluations_which_a_resumed_trial_continues():
    """Tune's training_iteration starts again at 1 when a trial is restored without a Tune
    checkpoint; the reports' num_evaluations counts the trial's evaluations across resumes."""
    space = SearchSpaceConfig.model_validate({"scheduler": {"type": "asha", "max_t": 3}})
    assert build_scheduler(space, JobConfig())._time_attr == "num_evaluations"


def test_training_arguments_follow_the_config(tmp_path):
    job, _ = load_sweep_configs(None, None, ["training.warmup_steps=0.1", "training.learning_rate=3e-5",
                                             "training.metric_for_best_model=loss"])
    args = build_training_arguments(job, output_dir=str(tmp_path))
    assert args.learning_rate == 3.0e-5 and args.warmup_steps == 0.1
    assert args.eval_strategy == "epoch" and args.save_strategy == "epoch"
    assert args.metric_for_best_model == "eval_loss" and args.greater_is_better is False
    assert args.load_best_model_at_end and args.save_total_limit == 2
    assert args.report_to == [] and args.use_cpu
    assert math.isclose(args.weight_decay, 0.01)


def _random_search(n: int, max_concurrent: int, seed: int = 0):
    """ftplat's random search over SPACE, loaded with n trials the way Tune loads it."""
    from ray.tune.experiment import Experiment

    space = SearchSpaceConfig.model_validate({**SPACE, "algorithm": "random", "seed": seed, "num_samples": n})
    alg = build_search_alg(space, max_concurrent=max_concurrent)
    alg.add_configurations([Experiment("x", lambda c: None, config=build_param_space(space), num_samples=n)])
    return alg


def _random_draws(seed, n=3):
    alg = _random_search(n, max_concurrent=n, seed=seed)
    return [alg.next_trial().config for _ in range(n)]


def test_random_search_draws_seeded_independent_trials():
    from ray.tune.search.basic_variant import BasicVariantGenerator

    assert SearchSpaceConfig().algorithm == "optuna"
    assert isinstance(build_search_alg(SearchSpaceConfig.model_validate({**SPACE, "algorithm": "random"}), 1),
                      BasicVariantGenerator)
    draws = _random_draws(0)
    assert draws == _random_draws(0) and draws != _random_draws(1)
    for config in draws:
        assert 1.0e-5 <= config["training.learning_rate"] <= 1.0e-3
        assert config["training.gradient_accumulation_steps"] in (1, 2, 3, 4)
    with pytest.raises(ValueError, match="algorithm"):
        SearchSpaceConfig.model_validate({**SPACE, "algorithm": "grid"})


def test_tpe_start_fits_the_trial_budget():
    assert SearchSpaceConfig.model_validate({**SPACE, "num_samples": 8}).build_startup_trials() == 2
    assert SearchSpaceConfig.model_validate({**SPACE, "num_samples": 20}).build_startup_trials() == 5
    assert SearchSpaceConfig.model_validate({**SPACE, "num_samples": 200}).build_startup_trials() == 10
    assert SearchSpaceConfig.model_validate({**SPACE, "num_samples": 3}).build_startup_trials() == 2
    assert SearchSpaceConfig.model_validate({**SPACE, "startup_trials": 7}).build_startup_trials() == 7
    with pytest.raises(ValueError, match="startup_trials applies to algorithm: optuna"):
        SearchSpaceConfig.model_validate({**SPACE, "algorithm": "random", "startup_trials": 3})


def _optuna_proposals(n: int, **extra) -> list[dict]:
    """n sequential proposals, each trial scoring higher the closer its lr is to 1e-4."""
    space = SearchSpaceConfig.model_validate({**SPACE, "num_samples": n, "seed": 3, **extra})
    alg = build_search_alg(space, max_concurrent=1)
    alg.set_search_properties("eval_accuracy", "max", build_param_space(space))
    out = []
    for i in range(n):
        config = alg.suggest(f"t{i}")
        out.append(config)
        alg.on_trial_complete(f"t{i}", {"eval_accuracy": -abs(math.log10(config["training.learning_rate"]) + 4)})
    return out


def test_optuna_models_finished_trials_after_its_start():
    """With 8 trials TPE starts modelling after 2 and its later proposals move towards the
    best learning rate; Optuna's default start of 10 would keep drawing at random."""
    learned = _optuna_proposals(8)
    pure_random = _optuna_proposals(8, startup_trials=10)
    assert learned[:2] == pure_random[:2]

    def mean_distance_to_best(configs):
        return sum(abs(math.log10(c["training.learning_rate"]) + 4) for c in configs) / len(configs)

    assert mean_distance_to_best(learned[2:]) < mean_distance_to_best(pure_random[2:])


def test_both_proposers_hold_to_max_concurrent_trials():
    """Tune ignores TuneConfig.max_concurrent_trials for a BasicVariantGenerator passed in
    (random search then started every trial at once); the proposers carry the limit."""
    alg = _random_search(3, max_concurrent=1)
    first = alg.next_trial()
    assert first is not None and alg.next_trial() is None
    alg.on_trial_complete(first.trial_id)
    assert alg.next_trial() is not None

    optuna_space = SearchSpaceConfig.model_validate({**SPACE, "num_samples": 3})
    alg = build_search_alg(optuna_space, max_concurrent=2)
    alg.set_search_properties("objective", "max", build_param_space(optuna_space))
    assert alg.suggest("t0") is not None and alg.suggest("t1") is not None
    assert alg.suggest("t2") is None
    alg.on_trial_complete("t0", {"objective": 0.5})
    assert alg.suggest("t2") is not None
