"""A trial is refused before the sweep starts when no placement on the cluster's nodes can hold
it: a worker never spans nodes, and Train V2 would retry an unplaceable worker group forever."""

from __future__ import annotations

import pytest

from ftplat.config.schema import JobConfig, ResourcesConfig
from ftplat.errors import UserError
from ftplat.runtime import DRIVER_MEMORY_BYTES, build_trial_driver_resources, check_trial_fits_nodes


def run_check_on(monkeypatch, nodes: list[dict], **resources) -> None:
    """``check_cluster_fits`` against a fake cluster: ``ray.nodes()`` and the matching totals."""
    import ray

    from ftplat.tune.sweep import check_cluster_fits

    alive = [n["Resources"] for n in nodes if n["Alive"]]
    totals = {k: sum(r.get(k, 0.0) for r in alive) for k in ("CPU", "GPU")}
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    monkeypatch.setattr(ray, "cluster_resources", lambda: totals)
    check_cluster_fits(JobConfig(resources=ResourcesConfig(**resources)))


def node(cpus: float, gpus: float = 0.0, alive: bool = True) -> dict:
    resources = {"CPU": cpus, "memory": 8e9, "node:10.0.0.1": 1.0}
    if gpus:
        resources["GPU"] = gpus
    return {"Alive": alive, "NodeID": "x", "Resources": resources}


def test_a_worker_larger_than_every_node_is_refused(monkeypatch):
    # 8 CPUs in all, enough for the trial's 6.25, but no single node has 6.
    with pytest.raises(UserError, match=r"resources\.cpus_per_worker: one worker needs 6 CPUs on a single node "
                                        r"but the largest node has 4 CPUs; lower resources\.cpus_per_worker"):
        run_check_on(monkeypatch, [node(4), node(4)], cpus_per_worker=6)


def test_a_worker_needing_more_gpus_than_any_node_has_is_refused(monkeypatch):
    with pytest.raises(UserError, match=r"resources\.cpus_per_worker / resources\.gpus_per_worker: one worker needs "
                                        r"1 CPUs and 2 GPUs .* the largest node has 8 CPUs and 1 GPUs"):
        run_check_on(monkeypatch, [node(8, 1), node(8, 1)], use_gpu=True, gpus_per_worker=2)


def test_workers_that_fit_one_by_one_but_not_all_together_are_refused(monkeypatch):
    # 7.75 of 8 CPUs in all and each 2.5-CPU worker fits a node, but only one fits per node.
    with pytest.raises(UserError, match=r"resources\.num_workers: 3 workers of 2\.5 CPUs each never fit .* "
                                        r"\(at most 2: .* largest node has 4 CPUs\); lower resources\.num_workers"):
        run_check_on(monkeypatch, [node(4), node(4)], num_workers=3, cpus_per_worker=2.5)


def test_a_trial_driver_larger_than_every_node_is_refused():
    with pytest.raises(UserError, match=r"resources\.trial_driver_cpus: the trial driver needs 3 CPUs .* "
                                        r"largest node has 2 CPUs; lower resources\.trial_driver_cpus"):
        check_trial_fits_nodes(ResourcesConfig(trial_driver_cpus=3, num_workers=2),
                               [{"CPU": 2.0}, {"CPU": 2.0}, {"CPU": 2.0}])


def test_the_driver_takes_room_from_the_node_it_lands_on():
    # 7.5 of 8 CPUs, and without the driver two 1.5-CPU workers fit on each node; beside the
    # 1.5-CPU driver its node holds only one.
    check_trial_fits_nodes(ResourcesConfig(trial_driver_cpus=1.5, num_workers=3, cpus_per_worker=1.5),
                           [{"CPU": 4.0}, {"CPU": 4.0}])
    with pytest.raises(UserError, match=r"4 workers of 1\.5 CPUs each never fit .* \(at most 3: "):
        check_trial_fits_nodes(ResourcesConfig(trial_driver_cpus=1.5, num_workers=4, cpus_per_worker=1.5),
                               [{"CPU": 4.0}, {"CPU": 4.0}])


def test_dead_nodes_do_not_count(monkeypatch):
    with pytest.raises(UserError, match=r"largest node has 2 CPUs"):
        run_check_on(monkeypatch, [node(2), node(2), node(64, alive=False)], cpus_per_worker=3)


@pytest.mark.parametrize("nodes, resources", [
    ([node(4), node(4)], {"num_workers": 2, "cpus_per_worker": 3.5}),  # driver beside one worker
    ([node(4)], {"num_workers": 3, "cpus_per_worker": 1.25}),  # 0.25 + 3 x 1.25 is exactly 4
    ([node(16, 1), node(16, 1)], {"num_workers": 2, "use_gpu": True}),
    ([node(1), node(4)], {"num_workers": 3}),
    ([node(4)], {"gpus_per_worker": 8}),  # GPUs only count when use_gpu is set
])
def test_trials_that_can_be_placed_pass(monkeypatch, nodes, resources):
    run_check_on(monkeypatch, nodes, **resources)


def test_the_cluster_totals_keep_their_message(monkeypatch):
    with pytest.raises(UserError, match=r"a trial needs 8.25 CPUs .* but the cluster has 4"):
        run_check_on(monkeypatch, [node(4)], num_workers=8)
    with pytest.raises(UserError, match=r"a trial needs 4 GPUs but the cluster has 2"):
        run_check_on(monkeypatch, [node(16, 1), node(16, 1)], num_workers=4, use_gpu=True)


def test_a_driver_without_cpus_leaves_whole_nodes_to_the_workers():
    # Two 2-CPU nodes: four 1-CPU workers fill them exactly, unless a driver takes a fraction
    # of a CPU too.
    with pytest.raises(UserError, match=r"a trial needs 4\.25 CPUs .* the cluster has 4;"):
        check_trial_fits_nodes(ResourcesConfig(num_workers=4), [{"CPU": 2.0}, {"CPU": 2.0}])
    check_trial_fits_nodes(ResourcesConfig(trial_driver_cpus=0, num_workers=4), [{"CPU": 2.0}, {"CPU": 2.0}])


def test_a_driver_without_cpus_reserves_memory_for_tune():
    # Tune refuses a trial that reserves nothing; the default reserves CPUs only.
    assert build_trial_driver_resources(ResourcesConfig()) == {"CPU": 0.25}
    assert build_trial_driver_resources(ResourcesConfig(trial_driver_cpus=0)) == {"CPU": 0,
                                                                                  "memory": DRIVER_MEMORY_BYTES}
    assert ResourcesConfig(trial_driver_cpus=0).cpus_per_trial == 1.0
    with pytest.raises(ValueError, match="trial_driver_cpus"):
        ResourcesConfig(trial_driver_cpus=-0.5)
    from ftplat.tune.plan import build_trial_resources_text

    assert "plus 0.25 CPU for the trial driver (1.25 CPUs a trial)" in build_trial_resources_text(JobConfig())
    text = build_trial_resources_text(JobConfig(resources=ResourcesConfig(trial_driver_cpus=0)))
    assert "plus no CPU for the trial driver, which reserves memory only (1 CPUs a trial)" in text
