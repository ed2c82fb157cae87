"""One engine: ``gpt2-onnx run``, the Python API (``Gpt2Onnx.generate``) and serve (its HTTP app, and its batching
engine alone and in a batch with other requests) give the same tokens, log-probabilities and finish reasons for
the same export and settings: greedy, seeded sampling with several sequences, stop strings, OpenAI's penalties,
logit_bias and best_of, and an export whose generation_config.json sets the options."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from gpt2_onnx.app.openai_api import ApiSettings, create_app
from gpt2_onnx.app.openai_options import http_defaults, request_options
from gpt2_onnx.app.openai_schema import parse_request
from gpt2_onnx.app.serving import ReplicaConfig, replica_runtime
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec, Update
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions
from gpt2_onnx_runtimes.decoding import best_ranks
from tests.conftest import export_checkpoint, save_checkpoint
from tests.helpers import invoke

PROMPT = "In a shocking finding, scientists"
FILLERS = ["Hello", "The quick brown fox jumps over the lazy dog and runs", "A"]  # other requests in the batch
SAMPLING_DEFAULTS = {"do_sample": True, "temperature": 0.8, "top_k": 40, "max_new_tokens": 6}
OPENAI_FINISH = {"eos": "stop", "stop": "stop", "length": "length"}


@dataclass(frozen=True)
class Case:
    """One setting, as each surface spells it."""

    flags: list[str]  # gpt2-onnx run
    api: dict[str, Any]  # Gpt2Onnx.options(**api)
    http: dict[str, Any]  # the completions request's fields
    defaults: bool = False  # run on the export whose generation_config.json sets SAMPLING_DEFAULTS


CASES = {
    "greedy": Case(["--greedy", "-n", "8"], {"max_new_tokens": 8}, {"temperature": 0, "max_tokens": 8}),
    "sampled, two sequences": Case(
        [
            "--sample",
            "--temperature",
            "0.9",
            "--top-p",
            "0.95",
            "--seed",
            "7",
            "--num-return-sequences",
            "2",
            "-n",
            "8",
        ],
        {
            "do_sample": True,
            "temperature": 0.9,
            "top_p": 0.95,
            "seed": 7,
            "num_return_sequences": 2,
            "max_new_tokens": 8,
        },
        {"temperature": 0.9, "top_p": 0.95, "seed": 7, "n": 2, "max_tokens": 8},
    ),
    "stop string": Case(  # the stop string is cut from the greedy text below (STOP)
        ["--greedy", "-n", "12", "--stop", "{stop}"],
        {"max_new_tokens": 12, "stop": ("{stop}",)},
        {"temperature": 0, "max_tokens": 12, "stop": "{stop}"},
    ),
    "penalties, logit_bias, best_of": Case(
        [
            *("--sample", "--seed", "3", "--presence-penalty", "0.6", "--frequency-penalty", "0.4"),
            *("--logit-bias", "262=4", "--logit-bias", "11=-100", "--best-of", "3", "--num-return-sequences", "2"),
            *("-n", "8"),
        ],
        {
            "do_sample": True,
            "seed": 3,
            "presence_penalty": 0.6,
            "frequency_penalty": 0.4,
            "logit_bias": {262: 4.0, 11: -100.0},
            "best_of": 3,
            "num_return_sequences": 2,
            "max_new_tokens": 8,
        },
        {
            "temperature": 1,
            "seed": 3,
            "presence_penalty": 0.6,
            "frequency_penalty": 0.4,
            "logit_bias": {"262": 4, "11": -100},
            "best_of": 3,
            "n": 2,
            "max_tokens": 8,
        },
    ),
    "the checkpoint's defaults": Case(["--seed", "5"], {"seed": 5}, {"seed": 5}, defaults=True),
}


@dataclass(frozen=True)
class Answer:
    """One returned sequence: its tokens (as ids, or as each token's text where HTTP gives only that)."""

    tokens: list[int]
    logprobs: list[float]
    finish: str
    text: str


@pytest.fixture(scope="module")
def defaults_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = save_checkpoint(tmp_path_factory.mktemp("sampling-defaults-checkpoint"))
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, **SAMPLING_DEFAULTS}))
    out = tmp_path_factory.mktemp("sampling-defaults-export") / "tiny"
    return export_checkpoint(folder, out, share_trace=True, check=False)  # the tiny weights' trace


@pytest.fixture(scope="module")
def exports(tiny_export: Path, defaults_export: Path) -> dict[bool, Path]:
    return {False: tiny_export, True: defaults_export}


@pytest.fixture(scope="module")
def models(exports: dict[bool, Path]) -> dict[bool, Gpt2Onnx]:
    return {key: Gpt2Onnx.load(folder) for key, folder in exports.items()}


def replica_engine(folder: Path, engine: EngineOptions) -> BatchEngine:
    """A batching engine loaded as a ``gpt2-onnx serve`` replica loads it (its own runtime options, ONNX Runtime's
    default threads), so that a replica's options that changed the log-probabilities would fail here."""
    config = ReplicaConfig(str(folder), ApiSettings("tiny"), engine)
    return BatchEngine.load(folder, replica_runtime(config, threads=None), engine)


@pytest.fixture(scope="module")
def engines(exports: dict[bool, Path]) -> Iterator[dict[bool, BatchEngine]]:
    """Engines driven step by step by the test (their loops never started)."""
    made = {key: replica_engine(folder, EngineOptions(max_rows=8, trim_columns=1)) for key, folder in exports.items()}
    yield made
    for engine in made.values():
        engine.close()


@pytest.fixture(scope="module")
def stop(models: dict[bool, Gpt2Onnx]) -> str:
    model = models[False]
    text = model.generate(PROMPT, model.options(max_new_tokens=12))[0].text
    return text[len(text) // 2 :][:3]  # appears mid-way through the greedy text


def _filled(value: Any, stop: str) -> Any:
    if isinstance(value, str):
        return value.replace("{stop}", stop)
    if isinstance(value, list | tuple):
        return type(value)(_filled(item, stop) for item in value)
    return value


def _case(name: str, stop: str) -> Case:
    case = CASES[name]
    fill = {key: _filled(value, stop) for key, value in case.http.items()}
    return Case(_filled(case.flags, stop), {k: _filled(v, stop) for k, v in case.api.items()}, fill, case.defaults)


def by_run(folder: Path, case: Case) -> list[Answer]:
    result = invoke("run", str(folder), "-p", PROMPT, "--json", *case.flags)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return [Answer(line["token_ids"], line["token_logprobs"], line["finish_reason"], line["text"]) for line in lines]


def by_api(model: Gpt2Onnx, case: Case) -> list[Answer]:
    results = model.generate(PROMPT, model.options(**case.api))
    return [Answer(r.token_ids, r.token_logprobs, r.finish_reason, r.text) for r in results]


def by_http(folder: Path, case: Case) -> list[dict[str, Any]]:
    """The request through serve's HTTP app, over an engine whose loop runs on its own thread."""
    engine = replica_engine(folder, EngineOptions(max_rows=8))
    app: FastAPI = create_app(engine, ApiSettings("tiny"))

    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
            body = {"model": "tiny", "prompt": PROMPT, "logprobs": 0, **case.http}
            return await client.post("/v1/completions", json=body)

    engine.start()
    try:
        response = asyncio.run(go())
    finally:
        engine.close()
    assert response.status_code == 200, response.text
    choices: list[dict[str, Any]] = response.json()["choices"]
    return choices


def by_engine(engine: BatchEngine, case: Case, batched: bool) -> list[Answer]:
    """The batching engine driven step by step, the request converted as HTTP converts it; ``batched``: other
    requests run beside it, arriving before and after."""
    body = parse_request({"model": "tiny", "prompt": PROMPT, **case.http})
    options = request_options(body, http_defaults(engine.defaults)).options
    spec = CompletionSpec(tuple(engine.tokenizer.encode(PROMPT)), options, logprobs=0)
    fillers = [
        CompletionSpec(tuple(engine.tokenizer.encode(p)), GenerationOptions(max_new_tokens=5 + i))
        for i, p in enumerate(FILLERS)
    ]
    updates: list[Update] = []
    schedule = [(0, fillers[0]), (1, spec), (2, fillers[1]), (3, fillers[2])] if batched else [(0, spec)]
    step = 0
    while schedule or engine.step():
        while schedule and schedule[0][0] <= step:
            _, submitted = schedule.pop(0)
            engine.submit(submitted, updates.append if submitted is spec else lambda update: None)
        if schedule:
            engine.step()
        step += 1
    drawn = [[u for u in updates if isinstance(u, ChoiceUpdate) and u.choice == c] for c in range(spec.choices)]
    answers = [
        Answer([u.token_id for u in ups], [u.logprob for u in ups], str(ups[-1].finish_reason), str(ups[-1].final_text))
        for ups in drawn
    ]
    places = best_ranks([a.logprobs for a in answers], options.num_return_sequences)
    return answers if len(answers) == options.num_return_sequences else [answers[p] for p in places]


@pytest.mark.parametrize("name", list(CASES))
def test_run_the_api_and_serve_give_the_same_answers(
    name: str,
    exports: dict[bool, Path],
    models: dict[bool, Gpt2Onnx],
    engines: dict[bool, BatchEngine],
    stop: str,
) -> None:
    case = _case(name, stop)
    model, engine = models[case.defaults], engines[case.defaults]
    expected = by_run(exports[case.defaults], case)
    assert expected == by_api(model, case)
    if name == "stop string":
        assert expected[0].finish == "stop", "the stop string ends the text"
    if name == "sampled, two sequences":
        assert expected[0].tokens != expected[1].tokens, "the two sequences differ"
    alone = by_engine(engine, case, batched=False)
    assert alone == expected  # tokens, log-probabilities (exactly) and finish reasons
    batched = by_engine(engine, case, batched=True)
    assert [(a.tokens, a.finish, a.text) for a in batched] == [(a.tokens, a.finish, a.text) for a in expected]
    for got, want in zip(batched, expected, strict=True):  # a batch's padding may move the last float bit
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    choices = by_http(exports[case.defaults], case)
    assert len(choices) == len(expected)
    for choice, want in zip(choices, expected, strict=True):
        assert choice["logprobs"]["tokens"] == [model.decode([t]) for t in want.tokens]
        assert choice["logprobs"]["token_logprobs"] == want.logprobs
        assert choice["finish_reason"] == OPENAI_FINISH[want.finish]
        assert choice["text"] == want.text
