"""``gpt2-onnx serve`` end to end: one server (a local Ray, one replica) on a loopback port for the module, driven
by the official OpenAI client and plain HTTP; then Ctrl-C, and SIGTERM during the shutdown, end it and every
process it started.

The module's server serves the committed fixture export of a trained checkpoint (``fixtures/pydocs-micro-fp32``,
as small as the tiny test model), not random weights: a request batched with others gets logits that differ from
its logits alone by float rounding (about 1e-7), and on random weights, whose next-token distributions are nearly
flat over 50,257 tokens, that is enough to move a sampled draw to the neighbouring token now and then (how often
depends on which requests happen to share a step, so on timing). A trained model's distributions are peaked, as
a real GPT-2's are, and the equality of concurrent and sequential results then holds for sampling too."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import random
import signal
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from benchmarks.serve_load import WORDS as LOAD_WORDS
from benchmarks.serve_process import ServeProcess
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from tests.helpers import invoke, one_error_line

KEY = "serve-test-key"
SERVED = Path(__file__).resolve().parents[1] / "fixtures" / "pydocs-micro-fp32"  # scripts/make_fixtures.py
PROMPT = "The meaning of life is"
WORDS = LOAD_WORDS[:27]  # the load's commonest words


@pytest.fixture(scope="module")
def served() -> Path:
    """The export the module's server serves (the requests name it "tiny")."""
    return SERVED


@pytest.fixture(scope="module")
def served_model(served: Path) -> Gpt2Onnx:
    return Gpt2Onnx.load(served)


@pytest.fixture(scope="module")
def server(served: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    logs = tmp_path_factory.mktemp("serve-logs")
    # -v after the command: the module's last test reads Ray's and Serve's own messages during its shutdown.
    process = ServeProcess(served, logs, "--api-key", KEY, "--max-batch", "8", "--model-name", "tiny", "-v")
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def client(server: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=120)


def run_json(export: Path, *args: str) -> dict[str, Any]:
    result = invoke("run", str(export), "--json", *args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_completion_equals_gpt2_onnx_run(client: openai.OpenAI, served: Path) -> None:
    expected = run_json(served, "-p", PROMPT, "-n", "16")
    answer = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=16, temperature=0)
    assert answer.choices[0].text == expected["text"]
    assert answer.choices[0].finish_reason == ("length" if expected["finish_reason"] == "length" else "stop")
    assert answer.usage is not None and answer.usage.completion_tokens == len(expected["token_ids"])


def test_streamed_chunks_concatenate_to_the_same_text(client: openai.OpenAI, served: Path) -> None:
    expected = run_json(served, "-p", PROMPT, "-n", "16")["text"]
    stream = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=16, temperature=0, stream=True)
    chunks = [chunk.choices[0].text for chunk in stream if chunk.choices]
    assert len(chunks) > 1 and "".join(chunks) == expected


def test_n_choices_with_a_seed_repeat_exactly(client: openai.OpenAI, served: Path) -> None:
    def ask() -> list[str]:
        answer = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=12, n=3, seed=42, temperature=0.9)
        return [choice.text for choice in sorted(answer.choices, key=lambda c: c.index)]

    first = ask()
    assert ask() == first and len(set(first)) > 1
    # choice j samples as sequence j of `gpt2-onnx run --sample --seed 42 --num-return-sequences 3`
    args = ["-p", PROMPT, "-n", "12", "--sample", "--temperature", "0.9", "--seed", "42", "--num-return-sequences", "3"]
    result = invoke("run", str(served), "--json", *args)
    assert result.exit_code == 0, result.output
    assert first == [json.loads(line)["text"] for line in result.stdout.splitlines()]


def _request(index: int) -> dict[str, Any]:
    """Request ``index`` of the load: prompt lengths 1..~60 tokens, greedy or seeded sampling."""
    rng = random.Random(index)
    body: dict[str, Any] = {
        "prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60))),
        "max_tokens": rng.randint(4, 24),
    }
    body.update({"temperature": 0} if index % 2 == 0 else {"temperature": 0.8, "top_p": 0.9, "seed": index})
    return body


def _alone(model: Gpt2Onnx, body: dict[str, Any]) -> str:
    sampled = body["temperature"] > 0
    drawn = {"temperature": body["temperature"], "top_p": body.get("top_p", 1.0), "seed": body.get("seed")}
    options = GenerationOptions(max_new_tokens=body["max_tokens"], do_sample=sampled, **(drawn if sampled else {}))
    return model.generate(body["prompt"], options)[0].text


def test_concurrent_clients_get_their_sequential_results(server: ServeProcess, served_model: Gpt2Onnx) -> None:
    clients, per_client = 16, 4
    expected = {i: _alone(served_model, _request(i)) for i in range(clients * per_client)}  # one at a time, in-process

    def one_client(number: int) -> dict[int, str]:
        own = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=120)
        got = {}
        for k in range(per_client):
            index = number * per_client + k
            got[index] = own.completions.create(model="tiny", **_request(index)).choices[0].text
        return got

    with ThreadPoolExecutor(clients) as pool:
        answers = {index: text for part in pool.map(one_client, range(clients)) for index, text in part.items()}
    wrong = [index for index in expected if answers[index] != expected[index]]
    assert not wrong, f"{len(wrong)} of {len(expected)} differ, e.g. {wrong[0]}: {answers[wrong[0]]!r}"


BAD = {
    # the list: (body or raw bytes, headers (None: the key), status, fragment)
    "no prompt": ({"model": "tiny"}, None, 400, "'prompt' is required"),
    "negative max_tokens": ({"model": "tiny", "prompt": "Hi", "max_tokens": -1}, None, 400, "max_tokens"),
    "beyond n_positions": ({"model": "tiny", "prompt": PROMPT, "max_tokens": 124}, None, 400, "128 positions"),
    "unknown model": ({"model": "davinci", "prompt": "Hi"}, None, 404, "'davinci' does not exist"),
    "temperature < 0": ({"model": "tiny", "prompt": "Hi", "temperature": -1}, None, 400, "temperature"),
    "unknown field": ({"model": "tiny", "prompt": "Hi", "mirostat": 2}, None, 400, "unknown field 'mirostat'"),
    "malformed JSON": (b'{"model": "tiny", prompt}', None, 400, "not valid JSON"),
    "missing API key": ({"model": "tiny", "prompt": "Hi"}, {}, 401, "missing API key"),
    "wrong API key": ({"model": "tiny", "prompt": "Hi"}, {"Authorization": "Bearer wrong"}, 401, "incorrect API key"),
}


BAD_PROMPTS = {
    # the prompt's class of gaps, as raw JSON (a lone surrogate, NaN): (body, fragment of the message, param)
    "lone surrogate": (b'{"model": "tiny", "prompt": "\\ud83d"}', "'prompt' is not valid Unicode: a lone", "prompt"),
    "lone surrogate in a list": (b'{"model": "tiny", "prompt": ["Hi", "a\\udc00"]}', "'prompt'[1] is not", "prompt"),
    "negative id": (
        b'{"model": "tiny", "prompt": [-1]}',
        "'prompt' holds token id -1 at position 0, outside",
        "prompt",
    ),
    "huge id": (
        b'{"model": "tiny", "prompt": [7, 99999999999999999999999]}',
        "at position 1, outside [0, 50257)",
        "prompt",
    ),
    "id beyond the vocabulary": (
        b'{"model": "tiny", "prompt": [[1], [50257]]}',
        "'prompt'[1] holds token id 50257",
        "prompt",
    ),
    "float id": (b'{"model": "tiny", "prompt": [1.0]}', "'prompt' must be a string, a list of strings", "prompt"),
    "non-string list member": (b'{"model": "tiny", "prompt": ["Hi", null]}', "'prompt' must be a string", "prompt"),
    "mixed id list": (b'{"model": "tiny", "prompt": [[1, "2"]]}', "'prompt' must be a string", "prompt"),
    "empty member": (b'{"model": "tiny", "prompt": ["Hi", ""]}', "'prompt'[1] is empty", "prompt"),
    "NaN": (b'{"model": "tiny", "prompt": "Hi", "temperature": NaN}', "NaN is not a JSON number", None),
    "Infinity": (b'{"model": "tiny", "prompt": "Hi", "max_tokens": Infinity}', "Infinity is not a JSON", None),
    "beyond n_positions": (
        json.dumps({"model": "tiny", "prompt": "Hi", "max_tokens": 128}).encode(),
        "prompt 0 has 1 token; with 'max_tokens' 128 that exceeds the model's 128 positions",
        "max_tokens",
    ),
}


@pytest.mark.parametrize("name", list(BAD_PROMPTS))
def test_bad_prompts_get_400s_naming_the_field(server: ServeProcess, name: str) -> None:
    body, fragment, param = BAD_PROMPTS[name]
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    with httpx2.Client(base_url=server.url, timeout=60) as http:
        response = http.post("/v1/completions", content=body, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert fragment in error["message"], error
    assert error["param"] == param and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("name", list(BAD))
def test_bad_requests_get_4xx_openai_errors_and_the_server_keeps_serving(
    server: ServeProcess, client: openai.OpenAI, name: str
) -> None:
    body, headers, status, fragment = BAD[name]
    sent = {"Authorization": f"Bearer {KEY}"} if headers is None else headers
    with httpx2.Client(base_url=server.url, timeout=60) as http:
        if isinstance(body, bytes):
            response = http.post("/v1/completions", content=body, headers={**sent, "Content-Type": "application/json"})
        else:
            response = http.post("/v1/completions", json=body, headers=sent)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"] and {"message", "type", "param", "code"} == set(error)
    assert client.completions.create(model="tiny", prompt="Hi", max_tokens=2).choices[0].text is not None


def test_models_health_and_chat(server: ServeProcess, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["tiny"]
    assert httpx2.get(f"{server.url}/health", timeout=30).json()["status"] == "ok"  # the probe needs no key
    with pytest.raises(openai.BadRequestError, match="no chat template"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}])


def test_sigterm_stops_the_server_as_ctrl_c_does_and_writes_no_credential(tiny_export: Path, tmp_path: Path) -> None:
    """What systemd, docker stop and Kubernetes send: "Stopped." and 0, not Ray's crash dump and 15. The embedded
    Ray's token stays in its processes' environment: no ~/.ray/auth_token (Ray writes it 0644) in this HOME."""
    home = tmp_path / "home"
    home.mkdir()
    process = ServeProcess(tiny_export, tmp_path / "logs", env={"HOME": str(home)}).start()
    assert process.replica_pids()
    code = process.stop([signal.SIGTERM])
    assert code == 0 and process.left_running == []
    assert process.stderr() == "Stopped.\n"  # nothing else: no crash dump, no Ray line at the start
    assert not (home / ".ray" / "auth_token").exists()


def test_nothing_the_server_started_listens_beyond_loopback(server: ServeProcess) -> None:
    """Ray's services, Serve's proxy and each replica's inter-deployment gRPC server: all on loopback."""
    listening = server.listening()
    assert ("127.0.0.1", server.port) in {(address, port) for _, address, port in listening}  # the API itself
    assert any(name.startswith("ray::ServeRepli") for name, _, _ in listening)  # the replica's gRPC server
    wide = [entry for entry in listening if not _loopback(entry[1])]
    assert not wide, f"listening beyond loopback: {wide}"


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None  # ::ffff:127.0.0.1
    return (mapped or ip).is_loopback


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--detach"], "--detach needs --address"),
        (["-v", "--detach"], "--detach needs --address"),  # -v after the command, as on every other command
        (["--replicas", "3", "--max-replicas", "2"], "--max-replicas (2) must be at least --replicas (3)"),
        (["--gpus-per-replica", "1"], "--gpus-per-replica needs --provider cuda"),
    ],
)
def test_serve_refuses_options_it_would_ignore(tiny_export: Path, args: list[str], fragment: str) -> None:
    result = invoke("serve", str(tiny_export), *args)
    assert result.exit_code == 2 and fragment in one_error_line(result.output)


def test_serve_refuses_a_bad_folder_and_a_busy_port(tmp_path: Path, tiny_export: Path) -> None:
    result = invoke("serve", str(tmp_path))
    assert result.exit_code == 2 and "manifest" in one_error_line(result.output)
    with listening_port() as port:
        busy = invoke("serve", str(tiny_export), "--port", str(port))
    assert busy.exit_code == 1 and f"cannot listen on 127.0.0.1:{port}" in one_error_line(busy.output)


@contextlib.contextmanager
def listening_port() -> Iterator[int]:
    """A loopback port something listens on for the block."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_the_application_builder_for_serve_config_files(tiny_export: Path) -> None:
    from ray.serve import Application

    from gpt2_onnx.app.serving import app_builder
    from gpt2_onnx_core.errors import InvalidInputError

    assert isinstance(app_builder({"export": str(tiny_export), "max_batch": 4, "api_key": "k"}), Application)
    with pytest.raises(InvalidInputError, match="unknown args replicas; the args are export, model_name"):
        app_builder({"export": str(tiny_export), "replicas": 2})
    with pytest.raises(InvalidInputError, match="provider must be one of cpu, cuda, got 'tpu'"):
        app_builder({"export": str(tiny_export), "provider": "tpu"})
    with pytest.raises(InvalidInputError, match="args lack 'export'"):
        app_builder({})
    for value in (False, "false", True, "True"):
        assert isinstance(app_builder({"export": str(tiny_export), "single_row_head": value}), Application)
    with pytest.raises(InvalidInputError, match="args 'single_row_head' must be true or false, got 'no'"):
        app_builder({"export": str(tiny_export), "single_row_head": "no"})
    for value in (True, "false"):
        assert isinstance(app_builder({"export": str(tiny_export), "spinning": value}), Application)
    with pytest.raises(InvalidInputError, match="args 'spinning' must be true or false, got 1"):
        app_builder({"export": str(tiny_export), "spinning": 1})


def test_the_api_key_comes_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt2_onnx.cli.serve_cmd import serve

    monkeypatch.setenv("GPT2_ONNX_API_KEY", "from-env")
    assert serve.make_context("serve", ["out"]).params["api_key"] == "from-env"
    assert serve.make_context("serve", ["out", "--api-key", "given"]).params["api_key"] == "given"


def test_the_flags_reach_the_deployment_by_name(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each flag lands in its own field of the ServeConfig that serve deploys (--address: no local Ray's
    environment is set up, and nothing is deployed: serve_until_stopped only records the config)."""
    from gpt2_onnx.app import serving
    from gpt2_onnx.cli.serve_cmd import CLUSTER_CPUS_PER_REPLICA

    seen: list[serving.ServeConfig] = []
    monkeypatch.setattr(serving, "serve_until_stopped", lambda config, announce, detach: seen.append(config))
    flags = ["--address", "auto", "--replicas", "2", "--max-replicas", "3", "--max-batch", "4", "--max-queue", "5"]
    more = ["--threads", "1", "--timeout", "7", "--port", "8123", "--no-single-row-head", "--spinning"]
    result = invoke("serve", str(tiny_export), *flags, *more)
    assert result.exit_code == 0, result.output
    (config,) = seen
    assert (config.replicas, config.max_replicas, config.address, config.port) == (2, 3, "auto", 8123)
    assert (config.cpus_per_replica, config.gpus_per_replica) == (CLUSTER_CPUS_PER_REPLICA, 0.0)
    replica = config.replica
    assert (replica.engine.max_rows, replica.engine.max_waiting, replica.threads, replica.provider) == (4, 5, 1, "cpu")
    assert (replica.api.timeout_s, replica.api.model_name, replica.export) == (7.0, tiny_export.name, str(tiny_export))
    assert not replica.single_row_head and not serving.replica_runtime(replica, 1).single_row_head
    assert serving.replica_runtime(serving.ReplicaConfig(replica.export, replica.api), 1).single_row_head
    assert replica.spinning and serving.replica_runtime(replica, 1).session_config == {}


def test_a_replicas_threads_sleep_unless_told_to_spin(tiny_export: Path) -> None:
    """The replica's sessions get ONNX Runtime's allow_spinning 0 by default (serving.SLEEPING_THREADS), and
    nothing of the kind with spinning (neither changes a result: tests/test_one_engine.py compares a replica's
    answers with ``run``'s, whose threads spin)."""
    from gpt2_onnx.app import serving
    from gpt2_onnx.app.openai_api import ApiSettings
    from gpt2_onnx.cli.serve_cmd import serve
    from gpt2_onnx_runtimes.ort_sessions import session_options_for

    default = serving.ReplicaConfig(str(tiny_export), ApiSettings(model_name="m"))
    assert not default.spinning
    assert next(param.default for param in serve.params if param.name == "spinning") is False  # the CLI's the same
    sleeping = serving.replica_runtime(default, 1)
    spinning = serving.replica_runtime(replace(default, spinning=True), 1)
    key = "session.intra_op.allow_spinning"
    assert session_options_for(sleeping).get_session_config_entry(key) == "0"
    with pytest.raises(RuntimeError, match="does not have configuration with key"):  # ONNX Runtime's default: spin
        session_options_for(spinning).get_session_config_entry(key)
    assert session_options_for(sleeping, beside_another_session=True).get_session_config_entry(key) == "0"
    assert replace(sleeping, session_config={}) == spinning


def test_check_here_opens_the_folder_as_a_replica_does(copy_export: Callable[[], Path]) -> None:
    """serve's early check is the runtime's one folder object (manifest, files, defaults) plus the tokenizer."""
    from gpt2_onnx.app.serving import check_here
    from gpt2_onnx_core.errors import ManifestError
    from gpt2_onnx_core.manifest import read_manifest

    folder = copy_export()
    export = check_here(folder, None)
    assert export.path == folder and export.manifest == read_manifest(folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ManifestError, match=r"lacks tokenizer\.json"):
        check_here(folder, None)


def test_ctrl_c_then_a_second_signal_stop_the_server_and_everything_it_started(server: ServeProcess) -> None:
    """The module's server, stopped as an impatient user stops it: Ctrl-C, then SIGTERM while the application is
    being removed. The shutdown completes, ends every process the server started, and -v (after the command)
    showed Ray's and Serve's own messages meanwhile. So this is the module's last test (pytest runs a file's tests
    in order), and the server fixture's own stop then finds nothing left to stop; a single signal's shutdown is
    test_sigterm_stops_the_server_as_ctrl_c_does_and_writes_no_credential's."""
    ray_processes = server.descendants()
    assert server.replica_pids() and len(ray_processes) > 3  # Ray's services, Serve's controller and proxy
    code = server.stop([signal.SIGINT, signal.SIGTERM])
    assert server.sent_during_shutdown == [signal.SIGTERM], "the server ended before the second signal"
    assert code == 0 and server.left_running == []
    assert "Serving 'tiny' at http://127.0.0.1:" in server.stdout()
    stderr = server.stderr()
    assert stderr.endswith("Stopped.\n") and "Traceback" not in stderr and "Interrupted." not in stderr
    assert "Started a local Ray instance" in stderr and "Deleting app" in stderr
    assert not list(Path("/tmp").glob(f"gpt2-onnx-ray-*/session_*_{server.pid}")), "Ray's folder was removed"
