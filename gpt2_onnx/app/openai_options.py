"""A completions request as one :class:`GenerationOptions`, converted once, as ``gpt2-onnx run`` resolves its flags.

    GenerationOptions' defaults  <  OpenAI's (16 tokens, temperature 1)  <  the export's generation_config.json
                                 <  the request's fields

So a request that leaves ``temperature`` or ``max_tokens`` out gets the checkpoint's ``do_sample``/``temperature``
and ``max_new_tokens`` where it sets them, as ``run`` does. The checkpoint's beam-search values and its
``num_return_sequences`` are not applied over HTTP (the server does not beam-search; a request's ``n`` decides)
and ``/v1/models`` lists them as not applied. OpenAI's rule for ``temperature`` 0 is kept: greedy decoding, which
reads neither ``top_p`` nor ``seed`` (they are dropped, not refused, since OpenAI's clients send them).
Every value is checked by GenerationOptions alone; its messages name the request's fields (:data:`FIELD_NAMES`).
"""

from __future__ import annotations

from typing import Any

from gpt2_onnx.app.openai_schema import ApiError, CompletionRequest, stop_list
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults, ResolvedOptions

__all__ = ["API_DEFAULTS", "FIELD_NAMES", "http_defaults", "model_defaults", "option_error", "request_options"]

API_DEFAULTS: dict[str, Any] = {"max_new_tokens": 16, "do_sample": True}  # OpenAI's: 16 tokens, temperature 1
NOT_OVER_HTTP = {
    "num_beams": "the server does not run beam search",
    "length_penalty": "the server does not run beam search",
    "early_stopping": "the server does not run beam search",
    "num_return_sequences": "a request's n decides",
}
# GenerationOptions' names as a request spells them, for OptionError's messages.
FIELD_NAMES = {
    "max_new_tokens": "'max_tokens'",
    "do_sample": "'temperature' > 0",
    "temperature": "'temperature'",
    "top_p": "'top_p'",
    "seed": "'seed'",
    "stop": "'stop'",
    "num_return_sequences": "'n'",
    "best_of": "'best_of'",
    "presence_penalty": "'presence_penalty'",
    "frequency_penalty": "'frequency_penalty'",
    "logit_bias": "'logit_bias'",
}
_PARAMS = {name: spelled.split("'")[1] for name, spelled in FIELD_NAMES.items()}


def http_defaults(defaults: CheckpointDefaults) -> CheckpointDefaults:
    """The checkpoint's defaults that requests get: all but :data:`NOT_OVER_HTTP`'s (beam search's and
    ``num_return_sequences``), which are reported as not applied."""
    return defaults.without(NOT_OVER_HTTP)


def _logit_bias(bias: dict[str, float]) -> dict[int, float]:
    try:
        return {int(token): value for token, value in bias.items()}
    except ValueError:
        raise ApiError(400, "'logit_bias': keys must be token ids (integers as strings)", param="logit_bias") from None


def _given(body: CompletionRequest) -> dict[str, Any]:
    """The GenerationOptions fields the request sets (left-out fields are absent)."""
    n = body.n or 1
    given: dict[str, Any] = {"num_return_sequences": n}
    if body.max_tokens is not None:
        given["max_new_tokens"] = body.max_tokens
    greedy = body.temperature == 0
    if body.temperature is not None:
        given["do_sample"] = not greedy
        if not greedy:
            given["temperature"] = body.temperature
    if not greedy:  # temperature 0 reads neither, as OpenAI's
        given.update({"top_p": body.top_p} if body.top_p is not None else {})
        given.update({"seed": body.seed} if body.seed is not None else {})
    if stop_list(body):
        given["stop"] = stop_list(body)
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(body, name) is not None:
            given[name] = getattr(body, name)
    if body.logit_bias:
        given["logit_bias"] = _logit_bias(body.logit_bias)
    if body.best_of is not None and body.best_of != n:
        given["best_of"] = body.best_of
    return given


def option_error(exc: OptionError) -> ApiError:
    """An OptionError as a 400 in the request's words, ``param`` the first field it names."""
    param = next((_PARAMS[name] for name in exc.names if name in _PARAMS), None)
    return ApiError(400, exc.render(FIELD_NAMES), param=param)


def request_options(body: CompletionRequest, defaults: CheckpointDefaults) -> ResolvedOptions:
    """The options ``body`` runs with (``defaults``: :func:`http_defaults` of the export's); ApiError (400) names
    the field at fault."""
    try:
        return defaults.resolve_over(API_DEFAULTS, _given(body))
    except OptionError as exc:
        raise option_error(exc) from None
    except InvalidInputError as exc:
        raise ApiError(400, str(exc)) from None


def model_defaults(defaults: CheckpointDefaults) -> dict[str, Any]:
    """What ``/v1/models`` says about the defaults requests get: the checkpoint's values applied (where the
    request leaves the field out; those a mode does not read are left out then), the ones not applied, and
    OpenAI's defaults below them."""
    return {
        "source": defaults.source and "generation_config.json",
        "applied": dict(defaults.values),
        "not_applied": dict(defaults.not_applied),
        "api_defaults": dict(API_DEFAULTS),
    }
