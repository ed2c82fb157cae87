"""The Python runtime API refuses bad inputs (token ids, shapes, dtypes, pasts) with typed errors naming what is
wrong, and below its checks an ONNX Runtime failure is still one typed error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_runtimes import Gpt2Onnx
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.validation import validate_feeds


@pytest.fixture(scope="module")
def api(tiny_export: Path) -> Gpt2Onnx:
    return Gpt2Onnx.load(tiny_export)


def ids(*rows: list[int]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def test_api_rejects_bad_prefill_inputs(api: Gpt2Onnx) -> None:
    good = ids([1, 2, 3])
    positions = ids([0, 1, 2])
    with pytest.raises(InvalidInputError, match=r"input_ids holds token id 50257, outside \[0, 50257\)"):
        api.prefill(ids([1, 50257, 3]), np.ones_like(good), positions)
    with pytest.raises(InvalidInputError, match=r"attention_mask shape \(1, 2\) does not match"):
        api.prefill(good, ids([1, 1]), positions)
    with pytest.raises(InvalidInputError, match="position_ids shape"):
        api.prefill(good, np.ones_like(good), ids([0, 1, 2], [0, 1, 2]))
    with pytest.raises(InvalidInputError, match="input_ids must be int64"):
        api.prefill(good.astype(np.int32), np.ones_like(good), positions)
    feeds = {"input_ids": good, "attention_mask": np.ones_like(good), "position_ids": positions}
    with pytest.raises(InvalidInputError, match="prefill takes no past_key_values"):
        validate_feeds("prefill", {**feeds, "past_key_values.0.key": np.zeros((1, 4, 0, 16), np.float32)}, api.dims)


def test_api_rejects_bad_past(api: Gpt2Onnx) -> None:
    new, mask, position = ids([5]), ids([1, 1, 1]), ids([2])
    kv = np.zeros((1, 4, 2, 16), dtype=np.float32)
    past = {f"past_key_values.{i}.{k}": kv for i in range(2) for k in ("key", "value")}
    assert api.decode_step(new, mask, position, past)["logits"].shape == (1, 1, 50257)
    with pytest.raises(InvalidInputError, match="must hold 2 layers"):
        api.decode_step(new, mask, position, {k: v for k, v in past.items() if ".1." not in k})
    with pytest.raises(InvalidInputError, match="must be float32, got float16"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": kv.astype(np.float16)})
    with pytest.raises(InvalidInputError, match=r"past_key_values.1.value has shape \(1, 4, 2, 8\)"):
        api.decode_step(new, mask, position, {**past, "past_key_values.1.value": np.zeros((1, 4, 2, 8), np.float32)})
    with pytest.raises(InvalidInputError, match=r"has shape \(2, 4, 2, 16\)"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": np.zeros((2, 4, 2, 16), np.float32)})
    with pytest.raises(InvalidInputError, match="disagree on the past length"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": np.zeros((1, 4, 3, 16), np.float32)})
    with pytest.raises(InvalidInputError, match=r"\(batch, past \+ new\) = \(1, 2 \+ 1\)"):
        api.decode_step(new, ids([1, 1]), position, past)


def test_onnxruntime_run_failures_are_typed(tiny_export: Path) -> None:
    """Below the validated API, an ONNX Runtime failure is still one typed error naming the graph."""
    from gpt2_onnx_core.errors import InferenceError

    loaded = LoadedExport.load(tiny_export)
    ids32 = np.array([[1, 2]], dtype=np.int32)  # the graph takes int64
    with pytest.raises(InferenceError, match=r"ONNX Runtime failed running prefill\.onnx: "):
        loaded.run("prefill", {"input_ids": ids32, "attention_mask": ids32, "position_ids": ids32})


BAD_PROMPT_IDS = [
    ([-1], r"prompt 0 holds token id -1 at position 0, outside \[0, 50257\)"),
    ([5, 2**70], r"prompt 0 holds token id 1180591620717411303424 at position 1, outside"),
    ([50257], r"prompt 0 holds token id 50257 at position 0"),
    ([1.5], r"prompt 0 holds 1.5 at position 0: token ids are integers in \[0, 50257\)"),
    ([True], r"prompt 0 holds True at position 0"),
    (["5"], r"prompt 0 holds '5' at position 0"),
    ([], r"prompt 0 is empty"),
]


@pytest.mark.parametrize(("prompt", "message"), BAD_PROMPT_IDS)
def test_generate_ids_refuses_what_is_not_a_token_id(api: Gpt2Onnx, prompt: list[object], message: str) -> None:
    """Negative, huge, out-of-vocabulary, non-integer ids: one InvalidInputError, not NumPy's OverflowError or a
    float silently truncated to an id (the check every prompt goes through: gpt2_onnx_runtimes.prompt_checks)."""
    with pytest.raises(InvalidInputError, match=message):
        api.generate_ids([prompt], api.options(max_new_tokens=2))  # type: ignore[list-item]  # wrong on purpose


@pytest.mark.parametrize("text", ["\ud83d", "fine \udced then"])  # a lone surrogate; an undecodable argv byte
def test_generate_and_stream_refuse_a_lone_surrogate(api: Gpt2Onnx, text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"prompt 0 is not valid Unicode: a lone surrogate U\+D"):
        api.generate(text, api.options(max_new_tokens=2))
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        api.stream(text, api.options(max_new_tokens=2))
    with pytest.raises(InvalidInputError, match="prompt 1 is a int, not text"):
        api.generate(["Hi", 3], api.options(max_new_tokens=2))  # type: ignore[list-item]  # wrong on purpose


@pytest.mark.parametrize(
    ("option", "value"),
    [("temperature", float("inf")), ("temperature", float("nan")), ("repetition_penalty", float("inf"))],
)
def test_options_refuse_infinities_and_nan(api: Gpt2Onnx, option: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=f"{option} must be a finite number > 0"):
        api.options(do_sample=True, **{option: value})
