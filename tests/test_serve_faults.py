"""A replica's process killed while clients keep it busy: the requests it held end at once with an HTTP error
(none hangs), Ray starts a new replica, and the requests after that succeed with the right text."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from benchmarks.serve_process import ServeProcess
from gpt2_onnx_core.serve_limits import MAX_BATCH_ROWS
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx

# More clients than the replica decodes rows (serve's default --max-batch): the rest wait in the replica's own
# queue, so while /health reports requests waiting, the replica holds requests that need at least a whole
# generation more. The clients ask for different numbers of tokens, so that they do not move in step.
_LENGTHS = (100, 83, 71, 59, 47, 37)
CLIENT_TOKENS = tuple(_LENGTHS[i % len(_LENGTHS)] for i in range(MAX_BATCH_ROWS + 8))
REQUEST_TIMEOUT_S = 60.0  # a request still open after this counts as hung
LOAD_S = 8.0  # the clients' loop, with the kill in its middle
RECOVERY_TIMEOUT_S = 120.0
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def server(tiny_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tiny_export, tmp_path_factory.mktemp("serve-fault-logs"))
    try:
        yield process.start()
    finally:
        process.stop()


def _body(max_tokens: int) -> dict[str, object]:
    return {"model": "tiny", "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}


Outcome = tuple[float, float, int | str, str, int]  # start, end, status or exception name, text, max_tokens


def _load(url: str, max_tokens: int, until: float, outcomes: list[Outcome]) -> None:
    """Send requests of ``max_tokens`` back to back until ``until``; record an :data:`Outcome` for each."""
    body = _body(max_tokens)
    with httpx2.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        for _ in range(1000):
            if time.monotonic() > until:
                return
            start = time.monotonic()
            try:
                response = http.post("/v1/completions", json=body)
                text = response.json()["choices"][0]["text"] if response.status_code == 200 else response.text
                outcomes.append((start, time.monotonic(), response.status_code, text, max_tokens))
            except httpx2.HTTPError as exc:
                outcomes.append((start, time.monotonic(), type(exc).__name__, str(exc), max_tokens))


def _kill_while_requests_wait(url: str, victim: int) -> float:
    """After a third of the load, SIGKILL the replica ``victim`` (one this test's server started) as soon as its
    /health reports requests waiting in its queue, and return when. (The clients' own clocks cannot tell whether a
    request they sent is in the replica: one sent just before the kill may still wait in Serve's proxy, which hands
    it to the new replica.)"""
    time.sleep(LOAD_S / 3)
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    with httpx2.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while http.get("/health").json()["waiting"] == 0:
            assert time.monotonic() < deadline, "no request waited in the replica while the clients kept it busy"
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    return killed_at


def test_a_killed_replica_is_replaced_and_no_request_hangs(server: ServeProcess, tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    expected = {n: model.generate(PROMPT, GenerationOptions(max_new_tokens=n))[0].text for n in set(CLIENT_TOKENS)}
    (victim,) = server.replica_pids()
    outcomes: list[Outcome] = []
    until = time.monotonic() + LOAD_S
    clients = [threading.Thread(target=_load, args=(server.url, n, until, outcomes)) for n in CLIENT_TOKENS]
    for client in clients:
        client.start()
    killed_at = _kill_while_requests_wait(server.url, victim)
    for client in clients:
        client.join(LOAD_S + 2 * REQUEST_TIMEOUT_S)
    assert not any(client.is_alive() for client in clients), "a request hung"

    in_flight = [o for o in outcomes if o[0] < killed_at < o[1]]
    failed = [o for o in in_flight if o[2] != 200]
    assert failed, f"no request the replica held failed: {in_flight}"
    assert all(isinstance(o[2], int) and o[2] >= 500 for o in failed), failed  # an HTTP error, at once
    assert all(o[1] - killed_at < REQUEST_TIMEOUT_S / 2 for o in failed)
    assert all(o[3] == expected[o[4]] for o in outcomes if o[2] == 200)

    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline and not (server.healthy() and server.replica_pids() not in ([], [victim])):
        time.sleep(0.5)
    assert server.healthy() and victim not in server.replica_pids()
    with httpx2.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
        later = [http.post("/v1/completions", json=_body(n)) for n in CLIENT_TOKENS[:3]]
    assert [r.status_code for r in later] == [200, 200, 200]
    assert [r.json()["choices"][0]["text"] for r in later] == [expected[n] for n in CLIENT_TOKENS[:3]]
