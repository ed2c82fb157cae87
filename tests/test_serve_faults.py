"""A replica's process killed while clients keep it busy: the requests it held end at once, unfinished (an HTTP
error, or a stream cut short; none hangs), Ray starts a new replica, and the requests after that succeed with the
right text."""

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
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx

# Each client asks for its own number of tokens, so that the clients' requests end at different times and the
# replica holds some of them at most moments (identical requests move in step: one batch, all ending together).
CLIENT_TOKENS = (100, 83, 71, 59, 47, 37)
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


class StreamProbe(threading.Thread):
    """A streamed request sent once the load has run a while: its first chunk proves that the replica holds it
    and is generating (a request the clients have sent may still wait in Serve's proxy, which hands it to the new
    replica once the old one is gone, so the clients' own clocks cannot tell). It records how its stream ended."""

    def __init__(self, url: str, start_after: float) -> None:
        super().__init__()
        self.url, self.start_after = url, start_after
        self.generating = threading.Event()
        self.lines: list[str] = []
        self.error: str | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        time.sleep(self.start_after)
        body = {**_body(max(CLIENT_TOKENS)), "stream": True}
        try:
            with (
                httpx2.Client(base_url=self.url, timeout=REQUEST_TIMEOUT_S) as http,
                http.stream("POST", "/v1/completions", json=body) as response,
            ):
                for line in response.iter_lines():
                    self.lines.append(line)
                    if line.startswith("data: {"):
                        self.generating.set()
        except httpx2.HTTPError as exc:
            self.error = type(exc).__name__
        finally:
            self.ended_at = time.monotonic()
            self.generating.set()  # a probe that failed before its first chunk wakes the test too

    @property
    def finished(self) -> bool:
        return "data: [DONE]" in self.lines


def test_a_killed_replica_is_replaced_and_no_request_hangs(server: ServeProcess, tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    expected = {n: model.generate(PROMPT, GenerationOptions(max_new_tokens=n))[0].text for n in CLIENT_TOKENS}
    (victim,) = server.replica_pids()
    outcomes: list[Outcome] = []
    until = time.monotonic() + LOAD_S
    clients = [threading.Thread(target=_load, args=(server.url, n, until, outcomes)) for n in CLIENT_TOKENS]
    probe = StreamProbe(server.url, start_after=LOAD_S / 3)
    for thread in [*clients, probe]:
        thread.start()
    assert probe.generating.wait(REQUEST_TIMEOUT_S) and not probe.finished, (probe.error, probe.lines)
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)  # mid-way through the probe's 100 tokens
    for thread in [*clients, probe]:
        thread.join(LOAD_S + 2 * REQUEST_TIMEOUT_S)
    assert not any(thread.is_alive() for thread in [*clients, probe]), "a request hung"

    # The request the replica was generating ends at once, unfinished; so does any other that it held.
    assert not probe.finished and probe.ended_at - killed_at < REQUEST_TIMEOUT_S / 2, (probe.error, probe.lines)
    failed = [o for o in outcomes if o[2] != 200]
    assert all(isinstance(o[2], int) and o[2] >= 500 for o in failed), failed  # an HTTP error, not a hang
    assert all(o[1] - max(o[0], killed_at) < REQUEST_TIMEOUT_S / 2 for o in failed), failed  # at once
    assert all(o[3] == expected[o[4]] for o in outcomes if o[2] == 200)

    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline and not (server.healthy() and server.replica_pids() not in ([], [victim])):
        time.sleep(0.5)
    assert server.healthy() and victim not in server.replica_pids()
    with httpx2.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
        later = [http.post("/v1/completions", json=_body(n)) for n in CLIENT_TOKENS[:3]]
    assert [r.status_code for r in later] == [200, 200, 200]
    assert [r.json()["choices"][0]["text"] for r in later] == [expected[n] for n in CLIENT_TOKENS[:3]]
