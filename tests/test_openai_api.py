"""The OpenAI-compatible app (gpt2_onnx.app.openai_api) in-process, without Ray: answers, streams, and every
refusal as a 4xx with an OpenAI-style error body, after which the app keeps serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from gpt2_onnx.app.openai_api import ApiSettings, create_app
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.batch_requests import CompletionSpec
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions

KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
PROMPT = "In a shocking finding, scientists"


@pytest.fixture(scope="module")
def app(tiny_export: Path) -> Iterator[FastAPI]:
    engine = BatchEngine.load(tiny_export, options=EngineOptions(max_rows=8))
    engine.start()
    yield create_app(engine, ApiSettings("tiny", api_key=KEY, max_body_bytes=4096))
    engine.close()


def call(app: FastAPI, method: str, path: str, headers: dict[str, str] | None = None, **kw: Any) -> httpx2.Response:
    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, headers=AUTH if headers is None else headers, **kw)

    return asyncio.run(go())


def complete(app: FastAPI, **body: Any) -> httpx2.Response:
    return call(app, "POST", "/v1/completions", json={"model": "tiny", "prompt": PROMPT, **body})


def events(response: httpx2.Response) -> list[Any]:
    lines = [line[len("data: ") :] for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", response.text
    return [json.loads(line) for line in lines[:-1]]


def test_greedy_completion_equals_generation(app: FastAPI, model: Gpt2Onnx) -> None:
    response = complete(app, max_tokens=10, temperature=0)
    assert response.status_code == 200, response.text
    body = response.json()
    expected = model.generate(PROMPT, GenerationOptions(max_new_tokens=10))[0]
    assert body["object"] == "text_completion" and body["model"] == "tiny"
    assert body["choices"] == [{"text": expected.text, "index": 0, "logprobs": None, "finish_reason": "length"}]
    prompt_tokens = len(model.encode(PROMPT))
    assert body["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 10,
        "total_tokens": prompt_tokens + 10,
    }


def test_stream_chunks_join_to_the_completion(app: FastAPI) -> None:
    whole = complete(app, max_tokens=12, temperature=0).json()["choices"][0]["text"]
    streamed = complete(app, max_tokens=12, temperature=0, stream=True, stream_options={"include_usage": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    chunks = events(streamed)
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    assert len(texts) > 1 and "".join(texts) == whole
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12


def test_prompt_lists_token_prompts_and_choices(app: FastAPI, model: Gpt2Onnx) -> None:
    body = complete(app, prompt=["Hello", PROMPT], n=2, max_tokens=4, seed=3).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    again = complete(app, prompt=[model.encode("Hello"), model.encode(PROMPT)], n=2, max_tokens=4, seed=3).json()
    assert [c["text"] for c in again["choices"]] == [c["text"] for c in body["choices"]]
    sampled = GenerationOptions(max_new_tokens=4, do_sample=True, seed=3, num_return_sequences=2)  # run's rule
    assert body["choices"][3]["text"] == model.generate(PROMPT, sampled)[1].text


def test_echo_stop_and_logprobs(app: FastAPI, model: Gpt2Onnx) -> None:
    echoed = complete(app, max_tokens=3, temperature=0, echo=True).json()["choices"][0]
    plain = complete(app, max_tokens=3, temperature=0, logprobs=2).json()["choices"][0]
    assert echoed["text"] == PROMPT + plain["text"]
    logprobs = plain["logprobs"]
    assert len(logprobs["tokens"]) == 3 and "".join(logprobs["tokens"]) == plain["text"]
    assert logprobs["text_offset"][0] == 0 and all(v <= 0 for v in logprobs["token_logprobs"])
    for token, top in zip(logprobs["tokens"], logprobs["top_logprobs"], strict=True):
        assert token in top and max(top.values()) == top[token]  # greedy: the chosen token is the likeliest
    full = model.generate(PROMPT, GenerationOptions(max_new_tokens=12))[0].text
    stop = full[len(full) // 2 :][:3]
    stopped = complete(app, max_tokens=12, temperature=0, stop=[stop, "never seen"]).json()["choices"][0]
    assert stopped == {"text": full[: full.index(stop)], "index": 0, "logprobs": None, "finish_reason": "stop"}


BAD_REQUESTS = {
    # name: (body or raw bytes, headers (None: the right key), status, fragment of the message)
    "no prompt": ({"model": "tiny"}, None, 400, "'prompt' is required"),
    "negative max_tokens": ({"prompt": "Hi", "max_tokens": -3}, None, 400, "max_tokens"),
    "prompt + max_tokens beyond n_positions": ({"prompt": PROMPT, "max_tokens": 125}, None, 400, "128 positions"),
    "unknown model": ({"model": "gpt-4", "prompt": "Hi"}, None, 404, "'gpt-4' does not exist"),
    "temperature < 0": ({"prompt": "Hi", "temperature": -0.5}, None, 400, "temperature"),
    "unknown field": ({"prompt": "Hi", "frobnicate": 1}, None, 400, "unknown field 'frobnicate'"),
    "malformed JSON": (b'{"model": "tiny", "prompt": ', None, 400, "not valid JSON"),
    "missing API key": ({"prompt": "Hi"}, {}, 401, "missing API key"),
    "wrong API key": ({"prompt": "Hi"}, {"Authorization": "Bearer nope"}, 401, "incorrect API key"),
    "max_tokens as text": ({"prompt": "Hi", "max_tokens": "16"}, None, 400, "max_tokens"),
    "top_p 0": ({"prompt": "Hi", "top_p": 0}, None, 400, "top_p"),
    "negative seed": ({"prompt": "Hi", "seed": -1}, None, 400, "seed"),
    "n 0": ({"prompt": "Hi", "n": 0}, None, 400, "'n'"),
    "n beyond the batch": ({"prompt": "Hi", "n": 9}, None, 400, "n is 9"),
    "logprobs 6": ({"prompt": "Hi", "logprobs": 6}, None, 400, "logprobs"),
    "echo with logprobs": ({"prompt": "Hi", "echo": True, "logprobs": 1}, None, 400, "echo with logprobs"),
    "presence_penalty 3": ({"prompt": "Hi", "presence_penalty": 3}, None, 400, "'presence_penalty' must lie in"),
    "logit_bias key": ({"prompt": "Hi", "logit_bias": {"x": -100}}, None, 400, "'logit_bias': keys"),
    "logit_bias id": ({"prompt": "Hi", "logit_bias": {"50257": -100}}, None, 400, "logit_bias"),
    "best_of below n": ({"prompt": "Hi", "best_of": 1, "n": 2}, None, 400, "'best_of' 1 is below 'n' 2"),
    "best_of greedy": ({"prompt": "Hi", "best_of": 3, "temperature": 0}, None, 400, "'best_of' > 1 needs"),
    "best_of stream": ({"prompt": "Hi", "best_of": 3, "stream": True}, None, 400, "cannot stream"),
    "suffix": ({"prompt": "Hi", "suffix": "!"}, None, 400, "suffix"),
    "five stops": ({"prompt": "Hi", "stop": list("abcde")}, None, 400, "stop"),
    "empty stop": ({"prompt": "Hi", "stop": ""}, None, 400, "stop"),
    "stream_options alone": ({"prompt": "Hi", "stream_options": {"include_usage": True}}, None, 400, "needs stream"),
    "prompt a number": ({"prompt": 42}, None, 400, "'prompt' must be"),
    "empty prompt": ({"prompt": ""}, None, 400, "empty"),
    "token outside the vocabulary": ({"prompt": [50257]}, None, 400, "outside"),
    "body not an object": (b"[1, 2]", None, 400, "JSON object"),
    "body too large": ({"prompt": "x" * 5000}, None, 413, "exceeds 4096 bytes"),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_bad_requests_get_openai_errors_and_the_app_keeps_serving(app: FastAPI, name: str) -> None:
    body, headers, status, fragment = BAD_REQUESTS[name]
    if isinstance(body, bytes):
        kw: dict[str, Any] = {"content": body, "headers": {**AUTH, "Content-Type": "application/json"}}
    else:
        kw = {"json": {"model": "tiny", **body}, "headers": AUTH if headers is None else headers}
    response = call(app, "POST", "/v1/completions", **kw)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"] and set(error) == {"message", "type", "param", "code"}
    assert complete(app, max_tokens=2).status_code == 200


def test_a_chunked_body_is_cut_off_at_the_limit(app: FastAPI) -> None:
    async def chunks() -> Any:  # no Content-Length: the size is only known as the bytes arrive
        yield b'{"model": "tiny", "prompt": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    response = call(
        app, "POST", "/v1/completions", content=chunks(), headers={**AUTH, "Content-Type": "application/json"}
    )
    assert response.status_code == 413 and "exceeds 4096 bytes" in response.json()["error"]["message"]


def test_other_routes(app: FastAPI) -> None:
    assert call(app, "GET", "/health", headers={}).json()["status"] == "ok"  # no key needed for the probe
    models = call(app, "GET", "/v1/models").json()
    card = {"id": "tiny", "object": "model", "created": 0, "owned_by": "gpt2-onnx"}
    assert models["data"] == [{**card, "generation_defaults": models["data"][0]["generation_defaults"]}]
    assert models["data"][0]["generation_defaults"]["api_defaults"] == {"max_new_tokens": 16, "do_sample": True}
    assert call(app, "GET", "/v1/models/tiny").json()["id"] == "tiny"
    assert call(app, "GET", "/v1/models", headers={}).status_code == 401
    chat = call(app, "POST", "/v1/chat/completions", json={"model": "tiny", "messages": []})
    assert chat.status_code == 400 and "no chat template" in chat.json()["error"]["message"]
    missing = call(app, "GET", "/v2/anything")
    assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]


@pytest.fixture
def stalled(tiny_export: Path) -> Iterator[tuple[FastAPI, BatchEngine]]:
    """An app over an engine whose loop never runs: requests wait until their timeout."""
    engine = BatchEngine.load(tiny_export, options=EngineOptions(max_waiting=1))
    yield create_app(engine, ApiSettings("tiny", timeout_s=0.3)), engine
    engine.close()


def test_a_request_past_its_timeout_gets_504(stalled: tuple[FastAPI, BatchEngine]) -> None:
    app, engine = stalled
    response = complete(app, max_tokens=4)
    assert response.status_code == 504 and response.json()["error"]["code"] == "timeout"
    streamed = events(complete(app, max_tokens=4, stream=True))
    assert streamed == [{"error": {"message": response.json()["error"]["message"], "type": "server_error",
                                   "param": None, "code": "timeout"}}]  # fmt: skip
    assert engine.stats().waiting == 0, "the timed-out requests were cancelled"


def test_a_full_queue_answers_503_at_once(stalled: tuple[FastAPI, BatchEngine]) -> None:
    app, engine = stalled
    engine.submit(
        CompletionSpec((15496,), GenerationOptions(max_new_tokens=4)), lambda update: None
    )  # the one place in the queue
    response = complete(app, max_tokens=4)
    assert response.status_code == 503 and response.json()["error"]["code"] == "server_busy"


def test_requests_open_when_the_replica_stops_get_503(tiny_export: Path) -> None:
    engine = BatchEngine.load(tiny_export)  # its loop never runs: the request stays queued
    app = create_app(engine, ApiSettings("tiny", timeout_s=60))

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://test") as client:
            pending = asyncio.create_task(client.post("/v1/completions", json={"model": "tiny", "prompt": "Hi"}))
            for _ in range(1000):
                if engine.stats().waiting:
                    break
                await asyncio.sleep(0.01)
            await asyncio.to_thread(engine.close)
            return await pending

    response = asyncio.run(go())
    assert response.status_code == 503 and "shutting down" in response.json()["error"]["message"]
