"""What ``bench`` measures: frozen settings passed explicitly to the runner and, as JSON, to each worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from gpt2_onnx_core.errors import OptionError
from gpt2_onnx_core.layouts import (
    KvCacheFormat,
    PromptKernel,
    SessionLayout,
    kv_cache_format,
    prompt_kernel,
    session_layout,
)
from gpt2_onnx_core.providers import ProviderName

__all__ = ["BenchSettings", "SystemSpec", "with_growth_base"]

SystemKind = Literal["onnx", "eager"]


@dataclass(frozen=True)
class BenchSettings:
    """How to measure. Defaults are the issue's: batch 1, 2 threads, prompt 128, 64 new tokens."""

    threads: int = 2  # intra-op threads of ONNX Runtime and torch alike
    prompt_lengths: tuple[int, ...] = (8, 128)  # prefill latency and time to first token, per length
    decode_prompt_length: int = 128  # the prompt before the timed decode steps
    new_tokens: int = 64  # tokens generated per decode run (the first comes from prefill)
    batch_size: int = 4  # rows of the throughput run
    batch_prompt_length: int = 32
    repeats: int = 5  # recorded rounds; every round runs each task once per system, interleaved
    warmup: int = 1  # unrecorded rounds first
    seed: int = 0  # prompt token ids are drawn from this seed, the same for every system
    provider: ProviderName = "cpu"
    attention: str = "sdpa"  # transformers' attention for the eager baseline (its default; "eager" is slower)
    # Untimed decode steps (of a short generation) each system runs right before each timed prefill and time to
    # first token: in use a prefill follows the previous generation's decode steps. 0: prefills back to back.
    decode_steps_before_prefill: int = 8
    # Seconds the runner waits before each timed request, so that the threads the previous system's worker left
    # spinning (ONNX Runtime's pools, OpenMP, TBB) have gone idle: each system measured as if alone.
    settle_s: float = 0.25
    # Extra decode runs, one after a prompt of each of these lengths (task "decode/C"): decode ms/token as the
    # context grows, beside the decode run after ``decode_prompt_length``. Stored sorted, each length once. With
    # ``decode_prompt_length`` among them, growth is over that run of as many steps (growth_over_context_run).
    decode_contexts: tuple[int, ...] = ()
    # Tokens generated in each of those runs (few: 64 after 1,000 would pass GPT-2's 1,024 positions).
    context_new_tokens: int = 16

    def __post_init__(self) -> None:
        positive = {
            "threads": self.threads,
            "new_tokens": self.new_tokens,
            "batch_size": self.batch_size,
            "batch_prompt_length": self.batch_prompt_length,
            "decode_prompt_length": self.decode_prompt_length,
            "repeats": self.repeats,
        }
        for name, value in positive.items():
            if value < 1:
                raise OptionError(f"{{{name}}} must be >= 1, got {value}", name)
        for name, value in (("warmup", self.warmup), ("decode_steps_before_prefill", self.decode_steps_before_prefill)):
            if value < 0:
                raise OptionError(f"{{{name}}} must be >= 0, got {value}", name)
        if not self.settle_s >= 0:
            raise OptionError(f"{{settle_s}} must be >= 0, got {self.settle_s}", "settle_s")
        if not self.prompt_lengths or min(self.prompt_lengths) < 1:
            raise OptionError(
                f"{{prompt_lengths}} must be >= 1, got {', '.join(map(str, self.prompt_lengths)) or 'none'}",
                "prompt_lengths",
            )
        self._check_decode_contexts()

    def _check_decode_contexts(self) -> None:
        """``decode_contexts`` positive, then stored sorted and without repeats (a list from JSON as a tuple);
        ``context_new_tokens`` at least 2, so that each of those runs has a decode step to time."""
        contexts = tuple(int(length) for length in self.decode_contexts)
        if contexts and min(contexts) < 1:
            raise OptionError(
                f"{{decode_contexts}} must be >= 1, got {', '.join(map(str, contexts))}", "decode_contexts"
            )
        object.__setattr__(self, "decode_contexts", tuple(sorted(set(contexts))))  # frozen: set once, here
        if self.context_new_tokens < 2:
            raise OptionError(
                f"{{context_new_tokens}} must be >= 2 (a decode step after the first token), "
                f"got {self.context_new_tokens}",
                "context_new_tokens",
            )

    @property
    def growth_over_context_run(self) -> bool:
        """Whether decode's growth with the context is taken over the decode run of ``context_new_tokens`` after
        ``decode_prompt_length`` tokens (that length is one of ``decode_contexts``) rather than over the decode
        run of ``new_tokens``. Both runs of the ratio then have as many steps, so that the first steps after a
        prompt, slower than the rest while a system's caches and threads settle, weigh alike in both."""
        return self.decode_prompt_length in self.decode_contexts

    @property
    def growth_contexts(self) -> tuple[int, ...]:
        """The ``decode_contexts`` whose decode runs get a growth: every one but ``decode_prompt_length``."""
        return tuple(length for length in self.decode_contexts if length != self.decode_prompt_length)

    def longest_sequence(self) -> int:
        """The most positions any task needs (it must fit the model's n_positions)."""
        return max(
            *self.prompt_lengths,
            self.decode_prompt_length + self.new_tokens,
            self.batch_prompt_length + self.new_tokens,
            *(length + self.context_new_tokens for length in self.decode_contexts),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["prompt_lengths"] = list(self.prompt_lengths)
        data["decode_contexts"] = list(self.decode_contexts)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchSettings:
        """The settings :meth:`to_json` wrote; JSON from before a field existed takes that field's default."""
        lists = {"prompt_lengths": tuple(data["prompt_lengths"])}
        if "decode_contexts" in data:
            lists["decode_contexts"] = tuple(data["decode_contexts"])
        return cls(**{**data, **lists})


def with_growth_base(decode_contexts: Sequence[int], decode_prompt_length: int) -> tuple[int, ...]:
    """The decode contexts a new run measures: ``decode_contexts`` and, where any are asked for,
    ``decode_prompt_length`` as well, so that each context's growth divides by a run of as many steps after the
    decode prompt (``BenchSettings.growth_over_context_run``), never by the longer decode run. Lengths below 1 are
    left as given, for :class:`BenchSettings` to refuse by the user's own list. Settings read back from older JSON
    keep the contexts they list."""
    contexts = tuple(decode_contexts)
    if not contexts or min(contexts) < 1:
        return contexts
    return (*contexts, decode_prompt_length)


@dataclass(frozen=True)
class SystemSpec:
    """One system to measure: an export folder on ONNX Runtime, or the source checkpoint on PyTorch eager (or,
    with ``factory``, any other system that speaks the worker protocol)."""

    kind: SystemKind
    label: str  # column heading
    folder: str | None = None  # onnx: the export folder
    model: str | None = None  # eager: the checkpoint (folder, hub id or random:NAME)
    seed: int | None = None  # eager: the seed of random:NAME weights
    layout: SessionLayout = "auto"  # onnx: the session layout, merged (one session) or split (the two graphs)
    share_weights: bool = True  # onnx, split layout: one map of the weights for both sessions (False: ONNX Runtime's)
    session_config: dict[str, str] = field(default_factory=dict)  # onnx: extra ONNX Runtime session config entries
    kv_cache: KvCacheFormat = "float32"  # onnx: the KV cache's format (int8: merged layout, in place, CPU)
    prompt_kernel: PromptKernel = "export"  # onnx: what multiplies prompts (dynamic: merged layout, CPU, int8/int4)
    # A system from outside this package (e.g. a peer runtime under benchmarks/): "module:callable", called with
    # (spec, settings) in the worker and returning a BenchSystem; ``kind`` then only says how the report treats it.
    factory: str | None = None
    python: str | None = None  # the worker's interpreter (another virtual environment); None: this one

    def __post_init__(self) -> None:
        session_layout(self.layout)  # OptionError naming the choices, here rather than when the system loads
        kv_cache_format(self.kv_cache)
        prompt_kernel(self.prompt_kernel)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SystemSpec:
        return cls(**data)
