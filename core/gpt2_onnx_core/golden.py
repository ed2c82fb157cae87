"""``golden.json``: a few prompts' token ids, their greedy continuation and last-position top-5 logits.

Written by ``export``: from the source model (transformers) for float32 exports, from the export itself (ONNX
Runtime, CPU) for fp16, int8 and int4, which do not reproduce the source model's tokens exactly; ``source`` says
which. Checked by ``verify``, and simple enough for the C++ and C# samples to check an export without Python:
feed ``input_ids``, decode greedily for ``len(greedy_ids)`` steps without stopping at end-of-text, compare ids
exactly and top-5 logits within the case's ``logits_atol`` (the file's own where a case has none).

fp32 (the source model's vectors): ``top5_logits`` are the source model's float64 values, and each case's
``logits_atol`` is the fp32 rule (:class:`gpt2_onnx_core.tolerances.ArithmeticRule`) applied to that case: a small
factor of the float32 source model's own largest distance from float64 over every position the case decodes
(``source_error``), plus a floor scaled by those logits' magnitude. A trained checkpoint's logits run to a hundred
and more, and so do their rounding errors: one absolute tolerance for every checkpoint cannot be right for both.
The file's ``logits_atol`` is then the largest case's.

Near-ties: ``greedy_margins`` holds, per step, how far the chosen token's logit lies above the runner-up's. Where
that margin is within 2 × ``logits_atol``, kernels that differ within the tolerance (another CPU, another ONNX
Runtime release, a quantized kernel's prompt and decode paths) may pick the runner-up; a check then accepts a
divergence at that step and compares no further (:func:`greedy_agreement`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import GOLDEN_FILE
from gpt2_onnx_core.prompts import CHECK_PROMPTS
from gpt2_onnx_core.wording import plural

__all__ = [
    "GOLDEN_PROMPTS",
    "GOLDEN_STEPS",
    "GoldenCase",
    "GoldenSet",
    "GreedyAgreement",
    "golden_case",
    "golden_prompt_ids",
    "greedy_agreement",
    "ranks_agree",
    "read_golden",
    "top2_margin",
    "write_golden",
]

GOLDEN_FORMAT = "gpt2-onnx-golden"
GOLDEN_SCHEMA = 1
GOLDEN_PROMPTS = CHECK_PROMPTS[:3]  # golden.json's cases: each carries its ids, so no tokenizer is needed
GOLDEN_STEPS = 16


@dataclass(frozen=True)
class GoldenCase:
    prompt: str
    input_ids: list[int]
    greedy_ids: list[int]  # the new tokens of greedy decoding, end-of-text not treated specially
    top5_ids: list[int]  # of the prompt's last-position logits, most likely first
    top5_logits: list[float]
    greedy_margins: list[float] = field(default_factory=list)  # per step: chosen logit - runner-up's (older: [])
    logits_atol: float | None = None  # this case's limit on |Δlogits| (None: the file's)
    source_error: float | None = None  # fp32: max |float32 source - float64 source| over the case's positions


@dataclass(frozen=True)
class GoldenSet:
    cases: list[GoldenCase]
    logits_atol: float  # the limit of cases without their own
    source: str  # how the expectations were computed
    tolerance: str = ""  # how the limits were set

    def atol_for(self, case: GoldenCase) -> float:
        """The limit on |Δlogits| for ``case``: its own, else the file's."""
        return self.logits_atol if case.logits_atol is None else case.logits_atol

    def to_json(self) -> dict[str, Any]:
        cases = [{k: v for k, v in case.__dict__.items() if v is not None} for case in self.cases]
        return {
            "format": GOLDEN_FORMAT,
            "schema_version": GOLDEN_SCHEMA,
            "source": self.source,
            "logits_atol": self.logits_atol,
            **({"tolerance": self.tolerance} if self.tolerance else {}),
            "rule": (
                "greedy: argmax each step for len(greedy_ids) steps, end-of-text not special; "
                "position_ids = cumsum(attention_mask) - 1; a case's logits_atol (where it has one, else the file's) "
                "limits |logits - top5_logits| and the KV cache's against a recompute; tokens may diverge only at a "
                "step whose greedy_margins entry is <= 2 * logits_atol (a near-tie), after which nothing more is "
                "compared"
            ),
            "cases": cases,
        }


def golden_prompt_ids(
    encode: Callable[[str], list[int]], n_positions: int, prompts: Sequence[str], steps: int
) -> list[list[int]]:
    """Each prompt's ids, cut so that prompt and greedy continuation fit the model's positions."""
    return [[int(i) for i in encode(prompt)[: max(1, n_positions - steps)]] for prompt in prompts]


def top2_margin(logits: np.ndarray) -> float:
    """How far the largest logit of ``logits`` (V,) lies above the second largest."""
    first, second = np.partition(logits.astype(np.float64), -2)[-2:][::-1]
    return float(first - second)


def golden_case(
    prompt: str,
    ids: Sequence[int],
    greedy: Sequence[int],
    last_logits: np.ndarray,
    margins: Sequence[float],
    limit: tuple[float, float] | None = None,
) -> GoldenCase:
    """One case from a prompt's ids, its greedy continuation, its last position's logits (V,) and each greedy
    step's top-2 margin; ``limit``: (the case's logits_atol, the float32 source's error it came from)."""
    if len(margins) != len(greedy):
        raise ValueError(f"{len(margins)} margins for {len(greedy)} greedy steps")
    top = np.argsort(-last_logits)[:5]
    return GoldenCase(
        prompt,
        [int(i) for i in ids],
        [int(t) for t in greedy],
        [int(i) for i in top],
        [float(last_logits[i]) for i in top],
        [float(m) for m in margins],
        None if limit is None else float(limit[0]),
        None if limit is None else float(limit[1]),
    )


@dataclass(frozen=True)
class GreedyAgreement:
    ok: bool
    detail: str


def greedy_agreement(got: Sequence[int], case: GoldenCase, atol: float) -> GreedyAgreement:
    """Tokens must equal the golden ones, except that at a near-tie step (margin <= 2 × atol) they may diverge;
    nothing after a divergence is compared. Without margins (older golden files) every step must match."""
    expected = case.greedy_ids
    for step, want in enumerate(expected):
        have = got[step] if step < len(got) else None
        if have == want:
            continue
        margin = case.greedy_margins[step] if step < len(case.greedy_margins) else None
        if have is not None and margin is not None and margin <= 2 * atol:
            matched = f"{plural(step, 'token')} {'matches' if step == 1 else 'match'}"
            note = f"{matched}, then a near-tie at step {step} (margin {margin:.3g} <= 2 x tol)"
            return GreedyAgreement(True, note)
        return GreedyAgreement(False, f"diverges at step {step}: {have} vs expected {want}")
    if len(got) != len(expected):
        return GreedyAgreement(False, f"{plural(len(got), 'token')} vs {len(expected)} expected")
    return GreedyAgreement(True, f"{len(expected)} greedy tokens match")


def ranks_agree(logits: np.ndarray, expected_ids: Sequence[int], atol: float) -> bool:
    """Whether ``expected_ids`` rank first in ``logits`` (V,) up to ties within the tolerance: at every rank, the
    expected id's logit lies within 2 × ``atol`` of the logit holding that rank here. fp32's limits (a few float32
    roundings) demand the exact order but for true ties; a reduced precision, whose kernels differ between machines
    and between prompt and decode shapes, may swap ids whose logits tie within its tolerance (the C++ and C# samples
    apply the same rule)."""
    top = np.argsort(-logits, kind="stable")[: len(expected_ids)]  # (k,)
    if len(top) != len(expected_ids):
        return False
    return bool(np.all(np.abs(logits[list(expected_ids)] - logits[top]) <= 2 * atol))


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]  # a JSON number; float() refuses others


def write_golden(folder: Path, golden: GoldenSet) -> str:
    (folder / GOLDEN_FILE).write_text(json.dumps(golden.to_json(), indent=2) + "\n", encoding="utf-8")
    return GOLDEN_FILE


def read_golden(folder: Path) -> GoldenSet:
    path = folder / GOLDEN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != GOLDEN_FORMAT or int(data["schema_version"]) > GOLDEN_SCHEMA:
            raise ManifestError(f"{path} is not a golden file this gpt2-onnx reads")
        cases = [
            GoldenCase(
                str(c["prompt"]),
                list(c["input_ids"]),
                list(c["greedy_ids"]),
                list(c["top5_ids"]),
                [float(v) for v in c["top5_logits"]],
                [float(v) for v in c.get("greedy_margins", [])],
                _optional_float(c.get("logits_atol")),
                _optional_float(c.get("source_error")),
            )
            for c in data["cases"]
        ]
        return GoldenSet(cases, float(data["logits_atol"]), str(data.get("source", "")), str(data.get("tolerance", "")))
    except FileNotFoundError as exc:
        raise ManifestError(f"'{folder}' has no {GOLDEN_FILE}") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"{path} is malformed: {exc}") from exc
