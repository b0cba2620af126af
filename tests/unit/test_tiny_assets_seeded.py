"""The integration tests' tiny models start from the same weights whatever ran before them: a
learning-quality assertion (the regression winner's test Pearson) must not pass or fail by the
order tests drew from torch's global generator."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from tiny_assets import write_tiny_bert


def test_tiny_bert_weights_do_not_depend_on_the_global_generator(tmp_path):
    torch.manual_seed(1)
    write_tiny_bert(tmp_path / "a")
    torch.manual_seed(2)
    state = torch.random.get_rng_state()
    write_tiny_bert(tmp_path / "b")
    assert torch.equal(torch.random.get_rng_state(), state), "the global generator was drawn from"
    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
