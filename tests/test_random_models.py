"""random:NAME weights are a function of the preset and the seed alone (``verify`` rebuilds them from a manifest,
perhaps under another transformers or torch release): GPT-2's initialisation scheme, each parameter drawn from a
stream of its own, the head tied."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")

from gpt2_onnx_exporters.random_models import build_random_model  # noqa: E402  # after the skip

# sha256 over random:tiny seed 0's parameters (sorted names, each name then its float32 bytes), as first made: a
# change here is a change of every random:NAME model, which every earlier export's verify would then fail.
TINY_SEED_0 = "079faba532015c694c35ce5f04f9fec1fe08ee5fe52874c87609fd3f7be9fd11"


def _fingerprint(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().numpy().tobytes())
    return digest.hexdigest()


def test_random_tiny_seed_0_is_the_same_weights_in_every_release() -> None:
    assert _fingerprint(build_random_model("tiny", seed=0)) == TINY_SEED_0


def test_the_weights_do_not_follow_torch_s_global_generator_or_transformers_initialisation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from transformers import GPT2LMHeadModel

    torch.manual_seed(123)
    torch.rand(1000)  # the global generator elsewhere in its stream
    monkeypatch.setattr(GPT2LMHeadModel, "_init_weights", lambda self, module: None)  # an initialisation that differs
    assert _fingerprint(build_random_model("tiny", seed=0)) == TINY_SEED_0


def test_seeds_differ_and_the_scheme_is_gpt2_s() -> None:
    model = build_random_model("tiny", seed=0)
    other = build_random_model("tiny", seed=1)
    assert _fingerprint(other) != TINY_SEED_0
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()  # the head is tied
    layers = model.config.n_layer
    block = model.transformer.h[0]
    assert model.transformer.wte.weight.std().item() == pytest.approx(0.02, rel=0.02)  # 50257 × 64 draws
    assert block.mlp.c_fc.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert block.mlp.c_proj.weight.std().item() == pytest.approx(0.02 / (2 * layers) ** 0.5, rel=0.05)
    assert block.attn.c_attn.bias.abs().max().item() == 0.0
    assert bool((block.ln_1.weight == 1).all()) and block.ln_1.bias.abs().max().item() == 0.0
    # two parameters of one shape draw different numbers: each has its own stream
    assert not torch.equal(block.attn.c_proj.weight, model.transformer.h[1].attn.c_proj.weight)
