"""scripts/verify_modes.py's pure parts: which runtime modes each export is verified in, what counts as the expected
outcome (a pass, or the one refusal a mode not offered must give), and the table."""

from __future__ import annotations

from typing import Any


def _report(result: str = "pass", export: float = 131.0, relative: float = 0.0123) -> dict[str, Any]:
    perplexity = {"export": export, "relative": relative, "max_relative": 0.05, "source": 129.4}
    return {"result": result, "comparisons": [{}] * 133, "perplexity": perplexity}


def test_the_prompt_kernel_is_verified_only_where_projections_are_matmulnbits() -> None:
    from scripts.verify_modes import EXPORTS, modes

    assert modes("fp32") == [[], ["--kv-cache", "int8"]]
    assert modes("int8, --matmul-kernel dynamic") == modes("fp16") == modes("fp32")
    for export in ("int8", "int4", "int4, --block-size 128"):
        assert ["--prompt-kernel", "dynamic", "--kv-cache", "int8"] in modes(export) and len(modes(export)) == 4
    assert sum(len(modes(export)) for export in EXPORTS) == 18


def test_a_pass_or_the_expected_refusal_is_as_expected_and_nothing_else() -> None:
    from scripts.verify_modes import Outcome, table

    passed = Outcome("int4", "--kv-cache int8", 0, _report(), "PASS")
    failed = Outcome("int4", "", 1, _report("fail"), "FAIL")
    refused = Outcome("fp16", "--kv-cache int8", 2, None, "Error: decode.onnx: layer 0's attention cannot ...")
    crashed = Outcome("fp32", "", 2, None, "Error: something else")
    assert passed.as_expected and refused.as_expected
    assert not failed.as_expected and not crashed.as_expected
    rows = table([passed, refused, crashed])
    assert rows[2] == "| int4 | --kv-cache int8 | pass | 133 | 131.0000 | +1.230 % | 5 % |"
    assert rows[3] == "| fp16 | --kv-cache int8 | refused (exit 2), as expected | — | — | — | — |"
    assert rows[4].startswith("| fp32 | defaults | exit 2: Error: something else |")
