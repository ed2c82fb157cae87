"""The OpenAI-compatible HTTP API over one batching engine: a FastAPI app, usable with or without Ray Serve.

Routes: ``POST /v1/completions`` (JSON or server-sent events), ``GET /v1/models``, ``GET /v1/models/{id}``, and
``GET /health``. Chat routes answer 400 (GPT-2 has no chat template). Every other path is a 404, every refusal an
OpenAI-style error body. The guard in front of the routes (:mod:`gpt2_onnx.app.guard`) checks the API key and the
body size before anything reads the request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from gpt2_onnx.app.completions import ChoiceAnswer, CompletionRun, best_answers, finish_word, logprobs_body
from gpt2_onnx.app.guard import Guard, json_error
from gpt2_onnx.app.openai_options import http_defaults, model_defaults, option_error, request_options
from gpt2_onnx.app.openai_schema import (
    ApiError,
    CompletionRequest,
    Prompt,
    completion_id,
    invalid,
    now,
    parse_request,
    prompt_list,
    prompt_name,
)
from gpt2_onnx_core.errors import Gpt2OnnxError, InvalidInputError, OptionError, ServerBusyError
from gpt2_onnx_core.serve_limits import MAX_BODY_BYTES, REQUEST_TIMEOUT_S
from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec
from gpt2_onnx_runtimes.batching import BatchEngine
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.prompt_checks import check_prompt_ids, check_prompt_text

__all__ = ["ApiSettings", "create_app"]


OWNER = "gpt2-onnx"


@dataclass(frozen=True)
class ApiSettings:
    """What the HTTP layer enforces."""

    model_name: str  # the name clients pass as "model"
    api_key: str | None = None  # None: no key asked for
    max_body_bytes: int = MAX_BODY_BYTES  # larger request bodies are refused (413) before they are read
    timeout_s: float = REQUEST_TIMEOUT_S  # a request's whole time, queue included; then 504 (or an error event)


def create_app(engine: BatchEngine, settings: ApiSettings) -> FastAPI:
    """The app serving ``engine`` (whose loop must be running: :meth:`BatchEngine.start`)."""
    app = FastAPI(title="gpt2-onnx", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, api_key=settings.api_key, max_body_bytes=settings.max_body_bytes)
    defaults = http_defaults(engine.defaults)
    card = {**_model_card(settings.model_name), "generation_defaults": model_defaults(defaults)}

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return json_error(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:  # unknown route, wrong method
        message = f"no route {request.method} {request.url.path}" if exc.status_code in (404, 405) else str(exc.detail)
        return json_error(ApiError(exc.status_code, message))

    @app.get("/health")
    async def health() -> dict[str, Any]:
        stats = engine.stats()
        return {"status": "ok", "waiting": stats.waiting, "running": stats.running}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{model_id}")
    async def model(model_id: str) -> dict[str, Any]:
        _check_model(model_id, settings.model_name)
        return card

    @app.api_route("/v1/chat/completions", methods=["GET", "POST"])
    async def chat() -> Response:
        raise ApiError(
            400,
            "GPT-2 has no chat template, so this server has no chat route; send a prompt to POST /v1/completions",
            code="unsupported_endpoint",
        )

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        deadline = asyncio.get_running_loop().time() + settings.timeout_s
        body = parse_request(_decode_json(await request.body()))
        _check_model(body.model, settings.model_name)
        job = _Completion(engine, body, settings.model_name, request_options(body, defaults).options)
        run = job.submit()
        if body.stream:
            headers = {"Cache-Control": "no-cache"}
            return StreamingResponse(job.events(run, deadline), media_type="text/event-stream", headers=headers)
        return JSONResponse(await job.answer(run, deadline))

    return app


def _model_card(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": OWNER}


def _check_model(given: str, served: str) -> None:
    if given != served:
        raise ApiError(
            404,
            f"the model '{given}' does not exist; this server serves '{served}'",
            param="model",
            code="model_not_found",
        )


def _not_json(constant: str) -> object:
    """Python's json module reads NaN, Infinity and -Infinity; JSON has no such numbers."""
    raise ValueError(f"{constant} is not a JSON number")


def _decode_json(raw: bytes) -> object:
    try:
        return json.loads(raw, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError too
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None


def _prompt_ids(engine: BatchEngine, prompt: Prompt, name: str) -> tuple[int, ...]:
    """The prompt's token ids, checked as every prompt is (gpt2_onnx_runtimes.prompt_checks): a 400 naming it."""
    try:
        if prompt.ids is not None:
            return check_prompt_ids(prompt.ids, engine.dims.vocab_size, name)
        ids = engine.tokenizer.encode(check_prompt_text(prompt.text, name))
    except InvalidInputError as exc:
        raise invalid(exc, "prompt") from None
    if not ids:
        raise ApiError(400, f"{name} encodes to no token", param="prompt")
    return tuple(ids)


def _spec(
    engine: BatchEngine, prompt: Prompt, body: CompletionRequest, options: GenerationOptions, name: str
) -> CompletionSpec:
    """One prompt of the request as the engine takes it."""
    return CompletionSpec(prompt_ids=_prompt_ids(engine, prompt, name), options=options, logprobs=body.logprobs)


def _timeout() -> ApiError:
    return ApiError(504, "the request did not finish within the server's timeout", "server_error", code="timeout")


def _failed(exc: Gpt2OnnxError) -> ApiError:
    if isinstance(exc, ServerBusyError):  # the replica is shutting down
        return ApiError(503, str(exc), "server_error", code="server_busy")
    return ApiError(500, f"generation failed: {exc}", "server_error")


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


class _Completion:
    """One POST /v1/completions: its prompts as the engine's specs, their choices' answers, and the bodies."""

    def __init__(self, engine: BatchEngine, body: CompletionRequest, model: str, options: GenerationOptions) -> None:
        self.engine, self.body, self.n = engine, body, options.num_return_sequences
        self.drawn = options.sequences_drawn  # best_of: this many choices run, the n best answer
        prompts = prompt_list(body.prompt)
        self.specs = [
            _spec(engine, prompt, body, options, prompt_name(i, len(prompts))) for i, prompt in enumerate(prompts)
        ]
        self.answers: list[ChoiceAnswer] = []
        for number, (prompt, spec) in enumerate(zip(prompts, self.specs, strict=True)):
            text = prompt.text if prompt.text is not None else engine.tokenizer.decode(spec.prompt_ids)
            prefix = text if body.echo else ""
            self.answers += [ChoiceAnswer(number * self.drawn + choice, prefix) for choice in range(self.drawn)]
        self.head = {"id": completion_id(), "object": "text_completion", "created": now(), "model": model}

    def submit(self) -> CompletionRun:
        try:
            return CompletionRun(self.engine, self.specs)
        except OptionError as exc:  # the options against the model (prompt length, token ids)
            raise option_error(exc) from None
        except InvalidInputError as exc:
            raise invalid(exc) from None
        except ServerBusyError as exc:
            raise ApiError(503, str(exc), "server_error", code="server_busy") from None

    def usage(self) -> dict[str, int]:
        prompt = sum(len(spec.prompt_ids) for spec in self.specs)
        completion = sum(len(answer.token_ids) for answer in self.answers)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    async def answer(self, run: CompletionRun, deadline: float) -> dict[str, Any]:
        """The whole completion, once every choice has finished."""
        try:
            async for number, update in run.updates(deadline):
                self.answers[number * self.drawn + update.choice].add(update)
        except asyncio.TimeoutError:
            raise _timeout() from None
        except Gpt2OnnxError as exc:
            raise _failed(exc) from None
        with_logprobs = self.body.logprobs is not None
        best = [best_answers(self.answers[i : i + self.drawn], self.n) for i in range(0, len(self.answers), self.drawn)]
        choices = [
            {**answer.body(self.engine.tokenizer, with_logprobs), "index": number}
            for number, answer in enumerate(a for group in best for a in group)
        ]
        return {**self.head, "choices": choices, "usage": self.usage(), "system_fingerprint": None}

    async def events(self, run: CompletionRun, deadline: float) -> AsyncIterator[str]:
        """The stream: a chunk per choice update that carries text or an end, usage if asked, then [DONE]; a
        failure or the timeout mid-stream is an error event before [DONE]."""
        try:
            async for number, update in run.updates(deadline):
                choice = self._chunk(self.answers[number * self.drawn + update.choice], update)
                if choice is not None:
                    yield _sse({**self.head, "choices": [choice]})
            if self.body.stream_options is not None and self.body.stream_options.include_usage:
                yield _sse({**self.head, "choices": [], "usage": self.usage()})
        except asyncio.TimeoutError:
            yield _sse(_timeout().body())
        except Gpt2OnnxError as exc:
            yield _sse(_failed(exc).body())
        yield "data: [DONE]\n\n"

    def _chunk(self, answer: ChoiceAnswer, update: ChoiceUpdate) -> dict[str, Any] | None:
        first = not answer.token_ids
        offset = len(answer.prefix) + sum(len(chunk) for chunk in answer.chunks)
        answer.add(update)
        text = (answer.prefix if first else "") + update.text
        logprobs = None
        if update.top_logprobs is not None:
            entry = (update.logprob, update.top_logprobs)
            logprobs = logprobs_body(self.engine.tokenizer, [update.token_id], [entry], offset)
        if not (text or logprobs or update.finish_reason):
            return None
        return {
            "text": text,
            "index": answer.index,
            "logprobs": logprobs,
            "finish_reason": finish_word(update.finish_reason),
        }
