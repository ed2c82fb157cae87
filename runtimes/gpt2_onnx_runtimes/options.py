"""How to generate: :class:`GenerationOptions`, validated once, with transformers' names and meanings.

Three ways to choose tokens, as transformers' ``generate`` names them: greedy (the default), sampling
(``do_sample``) and beam search (``num_beams`` > 1). An option that the chosen way would ignore is refused with one
line rather than dropped: sampling options without ``do_sample``, beam options without ``num_beams`` > 1, more
return sequences than greedy decoding or the beams give. Beam sampling (``do_sample`` with ``num_beams`` > 1) and
stop strings with beam search are not supported and refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gpt2_onnx_core.errors import OptionError

__all__ = [
    "BEAM_ONLY",
    "MAX_LOGIT_BIAS",
    "MAX_PENALTY",
    "SAMPLING_ONLY",
    "EarlyStopping",
    "GenerationOptions",
    "refuse_unread",
]

EarlyStopping = bool | Literal["never"]
# Options that only sampling reads, with their neutral values: set to anything else without do_sample, refused.
SAMPLING_ONLY: dict[str, object] = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": None}
# Options that only beam search reads, with their neutral values: set otherwise with num_beams 1, refused.
BEAM_ONLY: dict[str, object] = {"length_penalty": 1.0, "early_stopping": False}
MAX_PENALTY = 2.0  # OpenAI's range for presence_penalty and frequency_penalty: [-2, 2]
MAX_LOGIT_BIAS = 100.0  # OpenAI's range for a logit_bias value: [-100, 100]


def _token_ids(value: object, name: str, what: str) -> tuple[int, ...]:
    items = [value] if isinstance(value, int) else list(value) if isinstance(value, Sequence) else None
    if items is None or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in items):
        raise OptionError(f"{what} must be token ids (integers >= 0), got {value!r}", name)
    return tuple(items)


@dataclass(frozen=True)
class GenerationOptions:
    """How to generate. Greedy unless ``do_sample`` or ``num_beams`` > 1 (as in transformers' ``generate``)."""

    max_new_tokens: int = 50
    do_sample: bool = False
    temperature: float = 1.0  # sampling only; > 0
    top_k: int = 0  # sampling only; 0 keeps every token (transformers' generate defaults to 50)
    top_p: float = 1.0  # sampling only; in (0, 1]
    min_p: float = 0.0  # sampling only; in [0, 1]; 0 keeps every token
    repetition_penalty: float = 1.0  # > 0; 1 is off; every mode
    seed: int | None = None  # sampling only: same seed, same prompt → same text
    stop: tuple[str, ...] = ()  # stop when the generated text contains one of these (left out of the text)
    ignore_eos: bool = False  # keep going past the end-of-text token
    num_beams: int = 1  # > 1: beam search
    length_penalty: float = 1.0  # beam search only: a finished beam scores sum(log p) / length ** length_penalty
    early_stopping: EarlyStopping = False  # beam search only: True, False or "never", as transformers
    num_return_sequences: int = 1  # sequences per prompt, best first: <= num_beams; several when sampling
    no_repeat_ngram_size: int = 0  # > 0: no n-gram of this size occurs twice (prompt included); every mode
    min_new_tokens: int = 0  # no end-of-text before this many new tokens; every mode
    bad_words_ids: tuple[tuple[int, ...], ...] = ()  # token sequences never produced; every mode
    forced_eos_token_id: tuple[int, ...] = ()  # the last token allowed is forced to one of these; every mode
    presence_penalty: float = 0.0  # OpenAI's: minus this from each token generated at least once; every mode
    frequency_penalty: float = 0.0  # OpenAI's: minus this × how often each token was generated; every mode
    logit_bias: tuple[tuple[int, float], ...] = ()  # OpenAI's: (token id, bias) added to its logit; every mode
    best_of: int | None = None  # sampling: draw this many per prompt, return the num_return_sequences best

    def __post_init__(self) -> None:
        bad = self.bad_words_ids
        if isinstance(bad, int | str) or not isinstance(bad, Sequence):
            raise OptionError(f"{{bad_words_ids}} must be a list of token-id lists, got {bad!r}", "bad_words_ids")
        words = tuple(_token_ids(seq, "bad_words_ids", "each of {bad_words_ids}") for seq in bad)
        if any(len(seq) == 0 for seq in words):
            raise OptionError(
                "{bad_words_ids} holds an empty sequence; each needs at least one token id", "bad_words_ids"
            )
        object.__setattr__(self, "bad_words_ids", words)  # lists in, tuples kept: the options stay hashable
        object.__setattr__(
            self,
            "forced_eos_token_id",
            _token_ids(self.forced_eos_token_id, "forced_eos_token_id", "{forced_eos_token_id}"),
        )
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "logit_bias", _logit_bias(self.logit_bias))
        self._check_values()
        self._check_openai()
        self._check_modes()

    def _check_values(self) -> None:
        if self.max_new_tokens < 1:
            raise OptionError(f"{{max_new_tokens}} must be >= 1, got {self.max_new_tokens}", "max_new_tokens")
        if self.do_sample and not 0 < self.temperature < math.inf:
            raise OptionError(
                f"{{temperature}} must be a finite number > 0 when sampling, got {self.temperature}", "temperature"
            )
        if not 0 < self.top_p <= 1:
            raise OptionError(f"{{top_p}} must lie in (0, 1], got {self.top_p}", "top_p")
        if self.top_k < 0:
            raise OptionError(f"{{top_k}} must be >= 0 (0 disables it), got {self.top_k}", "top_k")
        if not 0 <= self.min_p <= 1:
            raise OptionError(f"{{min_p}} must lie in [0, 1] (0 disables it), got {self.min_p}", "min_p")
        if not 0 < self.repetition_penalty < math.inf:
            raise OptionError(
                f"{{repetition_penalty}} must be a finite number > 0, got {self.repetition_penalty}",
                "repetition_penalty",
            )
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise OptionError(f"{{seed}} must be an integer >= 0, got {self.seed!r}", "seed")
        if any(not s for s in self.stop):
            raise OptionError("{stop} strings must not be empty", "stop")
        for name in ("num_beams", "num_return_sequences"):
            if getattr(self, name) < 1:
                raise OptionError(f"{{{name}}} must be >= 1, got {getattr(self, name)}", name)
        for name in ("no_repeat_ngram_size", "min_new_tokens"):
            if getattr(self, name) < 0:
                raise OptionError(f"{{{name}}} must be >= 0 (0 disables it), got {getattr(self, name)}", name)
        if not math.isfinite(self.length_penalty):
            raise OptionError(
                f"{{length_penalty}} must be a finite number, got {self.length_penalty}", "length_penalty"
            )
        if not (self.early_stopping is True or self.early_stopping is False or self.early_stopping == "never"):
            raise OptionError(
                f"{{early_stopping}} must be True, False or 'never', got {self.early_stopping!r}", "early_stopping"
            )

    def _check_openai(self) -> None:
        """The options named after OpenAI's completions fields, in OpenAI's ranges."""
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not -MAX_PENALTY <= value <= MAX_PENALTY:
                raise OptionError(f"{{{name}}} must lie in [-{MAX_PENALTY:g}, {MAX_PENALTY:g}], got {value}", name)
        if any(not -MAX_LOGIT_BIAS <= bias <= MAX_LOGIT_BIAS for _, bias in self.logit_bias):
            raise OptionError(
                f"{{logit_bias}} values must lie in [-{MAX_LOGIT_BIAS:g}, {MAX_LOGIT_BIAS:g}]", "logit_bias"
            )
        if self.best_of is None:
            return
        if self.best_of < self.num_return_sequences:
            raise OptionError(
                f"{{best_of}} {self.best_of} is below {{num_return_sequences}} {self.num_return_sequences}: "
                "it draws the candidates the best are returned from",
                "best_of",
                "num_return_sequences",
            )
        if self.best_of > 1 and not self.do_sample:
            raise OptionError(
                "{best_of} > 1 needs {do_sample}: greedy decoding draws one sequence", "best_of", "do_sample"
            )

    @property
    def sequences_drawn(self) -> int:
        """Sequences generated per prompt: ``best_of`` when given, else ``num_return_sequences``."""
        return self.best_of if self.best_of is not None else self.num_return_sequences

    def _check_modes(self) -> None:
        """Refuse what the chosen way of generating would ignore or cannot do."""
        neutral = {**SAMPLING_ONLY, **BEAM_ONLY}
        refuse_unread(
            [name for name, value in neutral.items() if getattr(self, name) != value], self.do_sample, self.num_beams
        )
        if self.num_beams > 1 and self.do_sample:
            raise OptionError(
                "beam sampling ({do_sample} with {num_beams} > 1) is not supported: choose sampling or beam search",
                "do_sample",
                "num_beams",
            )
        if self.num_beams > 1 and self.stop:
            raise OptionError(
                "{stop} strings are not supported with beam search ({num_beams} > 1)", "stop", "num_beams"
            )
        if self.num_return_sequences > 1 and self.num_beams == 1 and not self.do_sample:
            raise OptionError(
                f"greedy decoding returns one sequence, not {{num_return_sequences}} {self.num_return_sequences}: "
                "pass {num_beams} >= it for beam search, or {do_sample}",
                "num_return_sequences",
                "num_beams",
                "do_sample",
            )
        if self.num_beams > 1 and self.num_return_sequences > self.num_beams:
            raise OptionError(
                f"{{num_return_sequences}} {self.num_return_sequences} exceeds {{num_beams}} {self.num_beams}; "
                "beam search returns at most one sequence per beam",
                "num_return_sequences",
                "num_beams",
            )
        if self.min_new_tokens > 0 and self.ignore_eos:
            raise OptionError(
                "{min_new_tokens} holds back the end-of-text token, which {ignore_eos} already ignores",
                "min_new_tokens",
                "ignore_eos",
            )

    @property
    def mode(self) -> Literal["greedy", "sample", "beam_search"]:
        if self.num_beams > 1:
            return "beam_search"
        return "sample" if self.do_sample else "greedy"

    def to_json(self) -> dict[str, object]:
        """The options as JSON values (tuples become lists)."""
        out: dict[str, object] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["bad_words_ids"] = [list(seq) for seq in self.bad_words_ids]
        out["forced_eos_token_id"] = list(self.forced_eos_token_id)
        out["stop"] = list(self.stop)
        out["logit_bias"] = {str(token): bias for token, bias in self.logit_bias}
        return out


def _logit_bias(value: object) -> tuple[tuple[int, float], ...]:
    """(token id, bias) pairs, sorted by id, from a mapping or pairs; ids are integers >= 0, biases finite numbers."""
    pairs = list(value.items()) if isinstance(value, Mapping) else list(value) if isinstance(value, Sequence) else None
    if pairs is None or any(not isinstance(p, tuple | list) or len(p) != 2 for p in pairs):
        raise OptionError(f"{{logit_bias}} must map token ids to numbers, got {value!r}", "logit_bias")
    out: dict[int, float] = {}
    for token, bias in pairs:
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise OptionError(f"{{logit_bias}} keys must be token ids (integers >= 0), got {token!r}", "logit_bias")
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not math.isfinite(bias):
            raise OptionError(f"{{logit_bias}} values must be finite numbers, got {bias!r}", "logit_bias")
        out[token] = float(bias)
    return tuple(sorted(out.items()))


def refuse_unread(names: Sequence[str], sampling: bool, beams: int) -> None:
    """Refuse options among ``names`` (those set, or given) that the mode chosen would not read: sampling's
    without ``do_sample``, beam search's without ``num_beams`` > 1 (OptionError naming them and the enabler)."""
    if not sampling:
        _refuse_set(
            [n for n in SAMPLING_ONLY if n in names],
            "only when sampling: pass {do_sample} too, or leave {them} out",
            "do_sample",
        )
    if beams == 1:
        _refuse_set(
            [n for n in BEAM_ONLY if n in names],
            "only to beam search: pass {num_beams} > 1 too, or leave {them} out",
            "num_beams",
        )


def _refuse_set(given: list[str], rule: str, enabler: str) -> None:
    if given:  # the chosen mode would ignore them: refused rather than silently dropped
        verb, them = ("applies", "it") if len(given) == 1 else ("apply", "them")
        names = " and ".join("{" + name + "}" for name in given)
        raise OptionError(f"{names} {verb} {rule.replace('{them}', them)}", *given, enabler)
