"""A search over ``resources`` can reach a trial larger than the job's own values: the fit
checks (this machine, the cluster once connected) and the size of a private local cluster
take the largest trial the search reaches, so such a sweep is refused before any work
instead of leaving that trial waiting forever for a placement."""

from __future__ import annotations

import pytest

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.errors import UserError
from ftplat.runtime import check_trial_fits_nodes
from ftplat.tune.preflight import build_largest_trial_job, check_largest_trial_fits

SPACE = {"num_samples": 2, "parameters": {
    "training.learning_rate": {"type": "loguniform", "low": 1e-5, "high": 1e-4},
    "resources.num_workers": {"type": "choice", "values": [1, 3]},
    "resources.cpus_per_worker": {"type": "uniform", "low": 1.0, "high": 2.0},
    "resources.max_failures": {"type": "int", "low": 0, "high": 5}}}


def test_the_largest_trial_takes_each_searched_sizing_field_at_its_largest():
    job = JobConfig.model_validate({"resources": {"num_workers": 1, "cpus_per_worker": 1}})
    largest, searched = build_largest_trial_job(job, SearchSpaceConfig.model_validate(SPACE))
    assert (largest.resources.num_workers, largest.resources.cpus_per_worker) == (3, 2.0)
    assert searched == ["resources.num_workers", "resources.cpus_per_worker"]  # max_failures sizes nothing
    assert largest.resources.max_failures == job.resources.max_failures
    plain = SearchSpaceConfig.model_validate({"parameters": {"training.weight_decay": {
        "type": "uniform", "low": 0.0, "high": 0.1}}})
    assert build_largest_trial_job(job, plain) == (job, [])


def test_a_searched_trial_the_cluster_cannot_place_is_refused_naming_the_parameters():
    job = JobConfig.model_validate({"resources": {"num_workers": 1, "cpus_per_worker": 1}})
    nodes = [{"CPU": 4.0}]

    def check(j):
        check_trial_fits_nodes(j.resources, nodes)

    assert check_largest_trial_fits(job, SearchSpaceConfig.model_validate({}), check) == []
    with pytest.raises(UserError, match=r"search space parameters resources.num_workers, "
                                        r"resources.cpus_per_worker: the largest trial .* needs 6.25 CPUs"):
        check_largest_trial_fits(job, SearchSpaceConfig.model_validate(SPACE), check)


def test_the_dry_run_refuses_a_search_this_machine_cannot_run(tmp_path, tiny_model_dir, sentiment_data_dir, capsys,
                                                              monkeypatch):
    from ftplat.cli.main import main as ftplat_main
    from ftplat.tune import preflight

    # The sweep would start its own local cluster (another test of this process may have
    # initialised Ray, which makes the machine check wait for the cluster's).
    monkeypatch.setattr(preflight, "read_private_cluster_planned", lambda: True)

    space = tmp_path / "space.yaml"
    space.write_text("num_samples: 2\nparameters:\n  resources.num_workers: {type: choice, values: [1, 64]}\n")
    code = ftplat_main(["sweep", "--dry-run", "--search-space", str(space), "--model", str(tiny_model_dir),
                        "--dataset", str(sentiment_data_dir), "--storage", str(tmp_path / "out")])
    assert code == 2 and not (tmp_path / "out").exists()
    assert "resources.num_workers: the largest trial they reach" in capsys.readouterr().err
