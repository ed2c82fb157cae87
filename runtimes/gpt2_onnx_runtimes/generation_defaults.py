"""The checkpoint's own generation defaults: the export's ``generation_config.json`` (the checkpoint's file, copied
by the export) supplies the options a caller leaves out, as it does for transformers' ``generate``.

    GenerationOptions' defaults  <  the checkpoint's generation_config.json  <  options given explicitly

A checkpoint value that the chosen mode would not read (say ``temperature`` when the caller asks for greedy
decoding, or ``length_penalty`` without beams) is left out and reported as unused, as transformers leaves it out; an
explicit option that the mode would not read is refused (:class:`~gpt2_onnx_runtimes.options.GenerationOptions`).
Keys that change generation in transformers but that gpt2-onnx does not apply (``max_length``, ``typical_p``, …) are
reported as not applied, never silently dropped. Reading this module costs no onnxruntime or numpy import.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gpt2_onnx_core.errors import InvalidInputError, ManifestError, OptionError
from gpt2_onnx_runtimes.options import BEAM_ONLY, SAMPLING_ONLY, GenerationOptions, refuse_unread

__all__ = ["GENERATION_CONFIG_FILE", "CheckpointDefaults", "ResolvedOptions"]

GENERATION_CONFIG_FILE = "generation_config.json"


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("an integer")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("a number")
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("true or false")
    return value


def _early_stopping(value: Any) -> bool | str:
    if value is True or value is False or value == "never":
        return value  # one of the three, checked just above
    raise TypeError('true, false or "never"')


def _id_lists(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list) or not all(isinstance(seq, list) for seq in value):
        raise TypeError("a list of token-id lists")
    return tuple(tuple(_integer(i) for i in seq) for seq in value)


def _ids(value: Any) -> tuple[int, ...]:
    return (_integer(value),) if not isinstance(value, list) else tuple(_integer(i) for i in value)


# generation_config.json keys applied as GenerationOptions fields of the same name, with how each is read.
APPLIED: dict[str, Callable[[Any], Any]] = {
    "max_new_tokens": _integer,
    "do_sample": _boolean,
    "temperature": _number,
    "top_k": _integer,
    "top_p": _number,
    "min_p": _number,
    "repetition_penalty": _number,
    "num_beams": _integer,
    "length_penalty": _number,
    "early_stopping": _early_stopping,
    "num_return_sequences": _integer,
    "no_repeat_ngram_size": _integer,
    "min_new_tokens": _integer,
    "bad_words_ids": _id_lists,
    "forced_eos_token_id": _ids,
}
# Keys that change what transformers generates but are not applied here, with the value that changes nothing.
NOT_APPLIED: dict[str, object] = {
    "max_length": None,  # counts the prompt (and its padding); gpt2-onnx counts new tokens only
    "min_length": 0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
    "diversity_penalty": 0.0,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "encoder_repetition_penalty": 1.0,
    "encoder_no_repeat_ngram_size": 0,
    "sequence_bias": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "exponential_decay_length_penalty": None,
    "renormalize_logits": False,
    "remove_invalid_values": False,
    "guidance_scale": None,
    "stop_strings": None,
    "max_time": None,
    "force_words_ids": None,
    "constraints": None,
    "watermarking_config": None,
}
_NOT_APPLIED_HINT = {
    "max_length": "give max_new_tokens (new tokens only)",
    "min_length": "give min_new_tokens (new tokens only)",
}


@dataclass(frozen=True)
class ResolvedOptions:
    """Options with their provenance: ``sources[name]`` is "given", "checkpoint" or "default" (the caller's own
    default, :meth:`CheckpointDefaults.resolve_over`) for every field that does not hold GenerationOptions' own
    default; ``unused`` names the checkpoint's values the mode does not read."""

    options: GenerationOptions
    sources: Mapping[str, str] = field(default_factory=dict)
    unused: Mapping[str, str] = field(default_factory=dict)
    not_applied: Mapping[str, str] = field(default_factory=dict)

    def from_checkpoint(self) -> list[str]:
        return [name for name, source in self.sources.items() if source == "checkpoint"]

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"options": self.options.to_json(), "from_checkpoint": self.from_checkpoint()}
        if self.unused:
            out["checkpoint_unused"] = dict(self.unused)
        if self.not_applied:
            out["checkpoint_not_applied"] = dict(self.not_applied)
        return out


@dataclass(frozen=True)
class CheckpointDefaults:
    """What an export's ``generation_config.json`` sets: ``values`` are GenerationOptions fields; ``not_applied``
    the keys gpt2-onnx does not apply, each with why."""

    values: Mapping[str, Any] = field(default_factory=dict)
    not_applied: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None  # the file read, if any

    @classmethod
    def read(cls, folder: str | Path) -> CheckpointDefaults:
        """The defaults of the export ``folder`` (none when it has no ``generation_config.json``)."""
        path = Path(folder) / GENERATION_CONFIG_FILE
        if not path.is_file():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"cannot read {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ManifestError(f"{path} holds no JSON object")
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = GENERATION_CONFIG_FILE) -> CheckpointDefaults:
        values: dict[str, Any] = {}
        for key, read in APPLIED.items():
            if data.get(key) is None:
                continue
            try:
                values[key] = read(data[key])
            except TypeError as exc:
                raise ManifestError(f"{source}: {key} must be {exc}, got {data[key]!r}") from exc
        not_applied = {
            key: f"{data[key]!r} is not applied" + (f": {_NOT_APPLIED_HINT[key]}" if key in _NOT_APPLIED_HINT else "")
            for key, neutral in NOT_APPLIED.items()
            if key in data and data[key] is not None and data[key] != neutral
        }
        return cls(values, not_applied, source)

    def resolve(self, **given: Any) -> ResolvedOptions:
        """GenerationOptions from these defaults and the ``given`` options (which win)."""
        return self.resolve_over({}, given)

    def resolve_over(self, base: Mapping[str, Any], given: Mapping[str, Any]) -> ResolvedOptions:
        """As :meth:`resolve`, with ``base`` between GenerationOptions' defaults and the checkpoint's: a caller's
        own defaults (the completions API's 16 tokens, sampled), which the checkpoint's values override."""
        known = {f.name for f in fields(GenerationOptions)}
        unknown = sorted((set(given) | set(base)) - known)
        if unknown:
            raise InvalidInputError(f"unknown generation option {unknown[0]!r}")
        merged = {**base, **self.values, **given}
        sampling, beams = bool(merged.get("do_sample", False)), int(merged.get("num_beams", 1))
        refuse_unread(list(given), sampling, beams)  # given, even at its neutral value: the mode would not read it
        unused: dict[str, str] = {}
        for name in [n for n in self.values if n not in given]:
            why = _unused_because(name, merged[name], sampling, beams)
            if why is not None:
                unused[name] = why
                del merged[name]
        try:
            options = GenerationOptions(**merged)
        except InvalidInputError as exc:
            taken = ", ".join(f"{n} {merged[n]!r}" for n in self.values if n in merged and n not in given)
            if not taken:
                raise
            where = f" (with the checkpoint's {GENERATION_CONFIG_FILE}: {taken})"
            if isinstance(exc, OptionError):  # still naming the options, so each caller spells them its way
                raise OptionError(exc.template + where, *exc.names) from exc
            raise InvalidInputError(f"{exc}{where}") from exc
        defaults = GenerationOptions()
        sources = {
            name: "given" if name in given else "checkpoint" if name in self.values else "default"
            for name in merged
            if name in given or getattr(options, name) != getattr(defaults, name)
        }
        return ResolvedOptions(options, sources, unused, dict(self.not_applied))

    def without(self, names: Mapping[str, str]) -> CheckpointDefaults:
        """These defaults with ``names``' values moved to ``not_applied``, each with its reason (what a caller
        that cannot apply them, such as the completions API, reports instead)."""
        dropped = {
            name: f"{self.values[name]!r} is not applied: {why}" for name, why in names.items() if name in self.values
        }
        values = {name: value for name, value in self.values.items() if name not in dropped}
        return CheckpointDefaults(values, {**self.not_applied, **dropped}, self.source)


def _unused_because(name: str, value: Any, sampling: bool, beams: int) -> str | None:
    """Why the mode chosen does not read the checkpoint's ``name``, or None when it does."""
    if name in SAMPLING_ONLY and not sampling:
        return "read only when sampling"
    if name in BEAM_ONLY and beams == 1:
        return "read only by beam search"
    if name == "num_return_sequences" and value > 1 and beams == 1 and not sampling:
        return "greedy decoding returns one sequence"
    if name == "num_return_sequences" and beams > 1 and value > beams:
        return f"more than num_beams {beams}"
    return None
