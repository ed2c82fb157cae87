"""Sliding-window perplexity, as data (numpy only): which tokens each window scores, how scored log-probabilities
become a perplexity, and the comparison of an export's with its source model's (each precision's limit is in
:mod:`gpt2_onnx_core.precisions`).

The windows are Hugging Face's perplexity guide's ("Perplexity of fixed-length models"): windows of ``window``
tokens start every ``stride`` tokens, the last one ends at the text's end, and each window scores only the tokens
the previous window did not; every token is predicted from the tokens before it inside its own window. The first
token of the text is never scored (nothing predicts it), and where ``stride == window`` the first token of each
later window is not scored either (its context lies in the previous window):

    token     0 1 2 3 4 5 6 7 8 9     window 6, stride 3, 10 tokens: 9 scored (c: context only, s: scored)
    window 1  c s s s s s             scores 1..5
    window 2        c c c s s s       scores 6..8
    window 3              c c c s     scores 9; it reaches the end, so no window follows

Both sides of a comparison score the same token ids over the same windows; the source's log-probabilities come from
the exporters (PyTorch), the export's from the runtime (ONNX Runtime), each through :func:`target_log_probs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpt2_onnx_core.errors import InvalidInputError, ManifestError, OptionError
from gpt2_onnx_core.precisions import precision_named
from gpt2_onnx_core.tolerances import PerplexityLimit
from gpt2_onnx_core.wording import plural

__all__ = [
    "Perplexity",
    "PerplexityComparison",
    "PerplexityRequest",
    "PerplexityText",
    "Window",
    "WindowPlan",
    "model_plan",
    "perplexity_limit",
    "plan_windows",
    "read_text",
    "target_log_probs",
]

_ROWS_PER_CHUNK = 128  # logits rows widened to float64 at a time: (128, V) float64 is 51 MB for GPT-2's vocabulary


@dataclass(frozen=True)
class Window:
    """One window: tokens ``begin`` to ``end`` (exclusive) are fed; targets ``scored_from`` to ``end`` are scored."""

    begin: int
    end: int
    scored_from: int  # > begin: the first scored target has at least one token of context in the window

    @property
    def scored(self) -> int:
        return self.end - self.scored_from


@dataclass(frozen=True)
class WindowPlan:
    """The windows over a text of ``n_tokens`` tokens."""

    n_tokens: int
    window: int  # tokens per window (the last may be shorter only when the text is)
    stride: int  # tokens between the starts of consecutive windows
    windows: tuple[Window, ...]

    @property
    def scored(self) -> int:
        """Tokens scored in all: ``n_tokens - 1`` whenever ``stride < window``."""
        return sum(w.scored for w in self.windows)

    def describe(self) -> str:
        return (
            f"{plural(self.scored, 'token')} scored of {self.n_tokens}, "
            f"{plural(len(self.windows), 'window')} of {self.window}, stride {self.stride}"
        )

    def to_json(self) -> dict[str, int]:
        return {
            "tokens": self.n_tokens,
            "scored_tokens": self.scored,
            "window": self.window,
            "stride": self.stride,
            "windows": len(self.windows),
        }


def plan_windows(n_tokens: int, window: int, stride: int) -> WindowPlan:
    """The windows of ``window`` tokens every ``stride`` tokens over ``n_tokens`` tokens (Hugging Face's loop).

    Raises :class:`InvalidInputError` for fewer than 2 tokens, :class:`OptionError` for a window below 2 or a
    stride outside 1..window."""
    if n_tokens < 2:
        raise InvalidInputError(
            f"the text has {plural(n_tokens, 'token')}; perplexity needs at least 2 (the first is never scored)"
        )
    if window < 2:
        raise OptionError(f"{{perplexity_window}} must be >= 2 tokens, got {window}", "perplexity_window")
    if not 1 <= stride <= window:
        raise OptionError(
            f"{{perplexity_stride}} must be 1..{window} (the window), got {stride}",
            "perplexity_stride",
            "perplexity_window",
        )
    windows: list[Window] = []
    previous_end = 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + window, n_tokens)
        windows.append(Window(begin, end, max(previous_end, begin + 1)))
        previous_end = end
        if end == n_tokens:
            break
    return WindowPlan(n_tokens, window, stride, tuple(windows))


def model_plan(n_tokens: int, n_positions: int, window: int | None = None, stride: int | None = None) -> WindowPlan:
    """:func:`plan_windows` for a model of ``n_positions`` positions: the window defaults to all of them, the
    stride to half the window (the guide's 1,024 and 512 for GPT-2); a window beyond the model is refused."""
    window = n_positions if window is None else window
    if window > n_positions:
        raise OptionError(
            f"{{perplexity_window}} {window} exceeds the model's {n_positions} positions", "perplexity_window"
        )
    return plan_windows(n_tokens, window, max(1, window // 2) if stride is None else stride)


def target_log_probs(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """log softmax(logits)[t, targets[t]] for each row t, in float64: ``logits`` (T, V) any float, ``targets`` (T,).

    Widened row chunk by row chunk, so that the log-sum-exp over a 50,257-word vocabulary adds no rounding of its
    own to the difference between two models' figures."""
    if logits.ndim != 2 or targets.shape != (logits.shape[0],):
        raise InvalidInputError(f"logits {logits.shape} and targets {targets.shape} do not pair row by row")
    found = np.empty(logits.shape[0], dtype=np.float64)  # (T,)
    for start in range(0, logits.shape[0], _ROWS_PER_CHUNK):
        rows = logits[start : start + _ROWS_PER_CHUNK].astype(np.float64)  # (t, V)
        top = rows.max(axis=1, keepdims=True)  # (t, 1)
        log_sum = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]  # (t,)
        chosen = rows[np.arange(rows.shape[0]), targets[start : start + _ROWS_PER_CHUNK]]  # (t,)
        found[start : start + rows.shape[0]] = chosen - log_sum
    return found


@dataclass(frozen=True)
class Perplexity:
    """One model's perplexity over the tokens a plan scores."""

    plan: WindowPlan
    nll_sum: float  # − Σ log p(token | its context), natural log, over the scored tokens

    @classmethod
    def of(cls, plan: WindowPlan, log_probs: np.ndarray) -> Perplexity:
        """From the log-probabilities (scored,) of the tokens ``plan`` scores, in order."""
        if log_probs.shape != (plan.scored,):
            raise InvalidInputError(f"{log_probs.shape} log-probabilities for a plan that scores {plan.scored}")
        return cls(plan, -float(np.sum(log_probs, dtype=np.float64)))

    @property
    def mean_nll(self) -> float:
        """Nats per scored token (the cross-entropy)."""
        return self.nll_sum / self.plan.scored

    @property
    def value(self) -> float:
        return math.exp(self.mean_nll)

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "perplexity": self.value, "mean_nll": self.mean_nll}


def perplexity_limit(precision: str) -> PerplexityLimit:
    """The limit of a manifest precision, from the precision table; a precision this release does not know is
    reported, not judged."""
    try:
        return precision_named(precision).perplexity
    except ManifestError:
        return PerplexityLimit(None, f"no perplexity limit for {precision}")


@dataclass(frozen=True)
class PerplexityComparison:
    """The source model and the export over the same windows of one text."""

    text: str  # the text file, as given
    source: Perplexity
    export: Perplexity
    limit: PerplexityLimit

    def __post_init__(self) -> None:
        if self.source.plan != self.export.plan:
            raise InvalidInputError("a perplexity comparison needs both models over the same windows")

    @property
    def plan(self) -> WindowPlan:
        return self.source.plan

    @property
    def difference(self) -> float:
        """ppl(export) − ppl(source)."""
        return self.export.value - self.source.value

    @property
    def relative(self) -> float:
        """ppl(export) / ppl(source) − 1."""
        return self.export.value / self.source.value - 1.0

    @property
    def ok(self) -> bool:
        return self.limit.max_relative is None or abs(self.relative) <= self.limit.max_relative

    def describe(self) -> str:
        limit = "" if self.limit.max_relative is None else f" (limit ±{self.limit.max_relative:.3g})"
        return (
            f"perplexity: export {self.export.value:.6g} vs source {self.source.value:.6g}, "
            f"Δ {self.difference:+.3g} (relative {self.relative:+.3g}){limit}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            **self.plan.to_json(),
            "source": self.source.value,
            "export": self.export.value,
            "difference": self.difference,
            "relative": self.relative,
            "source_mean_nll": self.source.mean_nll,
            "export_mean_nll": self.export.mean_nll,
            "max_relative": self.limit.max_relative,
            "basis": self.limit.basis,
            "ok": self.ok,
        }


def read_text(path: Path) -> str:
    """A UTF-8 text file's contents; :class:`InvalidInputError` for one missing, a folder, empty or not UTF-8."""
    if not path.exists():
        raise InvalidInputError(f"perplexity text '{path}' does not exist")
    if not path.is_file():
        raise InvalidInputError(f"perplexity text '{path}' is not a file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read perplexity text '{path}': {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"perplexity text '{path}' is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from exc
    if not text.strip():
        raise InvalidInputError(f"perplexity text '{path}' is empty")
    return text


@dataclass(frozen=True)
class PerplexityRequest:
    """What ``--perplexity`` asks for: a text file and its windows (None: the model's positions, half of them)."""

    path: Path
    window: int | None = None
    stride: int | None = None


@dataclass(frozen=True)
class PerplexityText:
    """A text file read, tokenized and cut into windows: what both models of a comparison score."""

    path: Path
    ids: tuple[int, ...]
    plan: WindowPlan

    @classmethod
    def read(
        cls,
        path: Path,
        encode: Callable[[str], list[int]],
        n_positions: int,
        window: int | None = None,
        stride: int | None = None,
    ) -> PerplexityText:
        """Read ``path`` (:func:`read_text`), encode it and plan its windows (:func:`model_plan`); every error
        here comes before any model loads."""
        ids = tuple(encode(read_text(path)))
        try:
            plan = model_plan(len(ids), n_positions, window, stride)
        except OptionError:
            raise
        except InvalidInputError as exc:
            raise InvalidInputError(f"perplexity text '{path}': {exc}") from exc
        return cls(path, ids, plan)
