"""OpenAI's completions request, checked, and the bodies the server answers with (errors, completions, chunks).

A request is checked here for its shape (types, unknown fields, the prompt's forms, OpenAI's own limits on ``n``,
``stop`` and ``logprobs``); what its generation fields mean and which values they may take is decided once, by
:class:`~gpt2_onnx_runtimes.options.GenerationOptions`, into which :mod:`gpt2_onnx.app.openai_options` converts
it. ``suffix`` is refused (GPT-2 does not insert); ``user`` is accepted (it identifies the caller and changes
nothing in the answer).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpt2_onnx_core.errors import InvalidInputError

__all__ = [
    "MAX_LOGPROBS",
    "MAX_STOPS",
    "ApiError",
    "CompletionRequest",
    "error_body",
    "parse_request",
    "prompt_list",
    "prompt_name",
]

MAX_LOGPROBS = 5  # OpenAI's limit on logprobs
MAX_STOPS = 4  # OpenAI's limit on stop strings


class ApiError(Exception):
    """An answer other than 200, with an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.param, self.code)


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    include_usage: bool = False


class CompletionRequest(BaseModel):
    """POST /v1/completions. ``None`` (or a field left out) means the default: the export's
    ``generation_config.json`` where it sets one, else OpenAI's (:mod:`gpt2_onnx.app.openai_options`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    prompt: Any  # a string, a list of strings, a list of token ids or a list of such lists (checked by prompt_list)
    max_tokens: int | None = None
    temperature: float | None = None  # 0: greedy
    top_p: float | None = None
    n: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    echo: bool | None = False
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = None  # the caller's own identifier; changes nothing
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    best_of: int | None = None
    logit_bias: dict[str, float] | None = None
    suffix: str | None = None  # refused unless null: GPT-2 does not insert


@dataclass(frozen=True)
class Prompt:
    """One prompt as the user gave it: text, or token ids."""

    text: str | None
    ids: tuple[int, ...] | None


def _field_name(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def parse_request(data: object) -> CompletionRequest:
    """Validate a decoded JSON body; ApiError (400) names the first field at fault."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        request = CompletionRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = _field_name(first["loc"])
        if first["type"] == "extra_forbidden":
            message = f"unknown field '{name}': not part of the completions API or not supported by this server"
        elif first["type"] == "missing":
            message = f"'{name}' is required"
        else:
            message = f"'{name}': {first['msg']}"
        raise ApiError(400, message, param=str(first["loc"][0]) if first["loc"] else None) from None
    _refuse_unsupported(request)
    return request


def _refuse_unsupported(request: CompletionRequest) -> None:
    checks = [
        ("suffix", request.suffix is None, "suffix (insertion) is not supported by GPT-2"),
        ("stream_options", request.stream_options is None or bool(request.stream), "stream_options needs stream"),
        (
            "logprobs",
            not (request.echo and request.logprobs is not None),
            "logprobs of the prompt (echo with logprobs) are not supported",
        ),
        (
            "best_of",
            not (request.stream and request.best_of not in (None, request.n or 1)),
            "best_of above n cannot stream: the best are known only at the end",
        ),
    ]
    for name, ok, reason in checks:
        if not ok:
            raise ApiError(400, f"'{name}': {reason}", param=name)
    stops = stop_list(request)
    if len(stops) > MAX_STOPS or any(not stop for stop in stops):
        raise ApiError(400, f"'stop': give at most {MAX_STOPS} non-empty strings", param="stop")


def stop_list(request: CompletionRequest) -> tuple[str, ...]:
    if request.stop is None:
        return ()
    return (request.stop,) if isinstance(request.stop, str) else tuple(request.stop)


def _is_ids(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


def prompt_list(prompt: object) -> list[Prompt]:
    """The request's prompts; ApiError unless it is a string, a list of strings, of token ids, or of id lists."""
    if isinstance(prompt, str):
        found = [Prompt(prompt, None)]
    elif _is_ids(prompt) and prompt:
        found = [Prompt(None, tuple(prompt))]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        found = [Prompt(p, None) for p in prompt]
    elif isinstance(prompt, list) and prompt and all(_is_ids(p) for p in prompt):
        found = [Prompt(None, tuple(p)) for p in prompt]
    else:
        raise ApiError(
            400,
            "'prompt' must be a string, a list of strings, a list of token ids, or a list of lists of token ids",
            param="prompt",
        )
    for index, item in enumerate(found):
        if item.text == "" or item.ids == ():
            raise ApiError(400, f"{prompt_name(index, len(found))} is empty; give at least one token", param="prompt")
    return found


def invalid(exc: InvalidInputError, param: str | None = None) -> ApiError:
    """A runtime refusal (a prompt's text or token ids, n) as a 400 naming the field at fault. An OptionError is
    spelled in the request's words by :func:`gpt2_onnx.app.openai_options.option_error` instead."""
    return ApiError(400, str(exc), param=param)


def prompt_name(index: int, count: int) -> str:
    """How errors name prompt ``index`` of ``count``: ``'prompt'`` alone, ``'prompt'[1]`` in a list."""
    return "'prompt'" if count == 1 else f"'prompt'[{index}]"


def completion_id() -> str:
    return f"cmpl-{secrets.token_hex(12)}"


def now() -> int:
    return int(time.time())
