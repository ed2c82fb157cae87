"""The serving benchmarks' own machinery: the app without Ray Serve that serve_options puts beside ``gpt2-onnx
serve``, serve_engine_round's price of the batch's padding and its profile split (on the tiny export or a profile
written here), and serve_peers' warm-up. No timing is asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _benchmarks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))


def test_serve_options_variants_are_options_environment_or_the_app_without_ray(tmp_path: Path) -> None:
    from benchmarks.serve_options import server_for
    from benchmarks.serve_process import ServeProcess
    from benchmarks.serve_without_ray import AppWithoutRay

    plain = server_for(Path("e"), tmp_path, ["--kv-cache", "int8"])
    assert type(plain) is ServeProcess
    assert plain._command[-4:] == ["--model-name", "bench", "--kv-cache", "int8"]
    tuned = server_for(
        Path("e"), tmp_path, ["RAY_SERVE_CONTROL_LOOP_INTERVAL_S=1", "RAY_enable_metrics_collection=0", "--spinning"]
    )
    assert tuned._command[-3:] == ["--model-name", "bench", "--spinning"]
    assert tuned._env == {"RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "1", "RAY_enable_metrics_collection": "0"}
    bare = server_for(Path("e"), tmp_path, ["@without-ray"])
    assert isinstance(bare, AppWithoutRay)
    assert bare._command[1].endswith("serve_without_ray.py") and bare._command[2:5] == ["e", "--port", str(bare.port)]


def test_the_app_without_ray_answers_as_serve_does(tiny_export: Path, tmp_path: Path) -> None:
    """The same app and engine under uvicorn: a completion, then a clean stop by Ctrl-C."""
    from benchmarks.serve_without_ray import AppWithoutRay

    server = AppWithoutRay(tiny_export, tmp_path / "logs", threads=1).start()
    try:
        body = {"model": "bench", "prompt": "Hello there", "max_tokens": 4, "temperature": 0}
        answer = httpx2.post(f"{server.url}/v1/completions", json=body, timeout=60).json()
        assert answer["usage"]["completion_tokens"] >= 1 and isinstance(answer["choices"][0]["text"], str)
    finally:
        code = server.stop()
    assert code is not None and server.left_running == []


def test_width_cost_fits_the_steps_to_a_line_and_leaves_the_batch_empty(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks.serve_engine_round as engine_round
    from gpt2_onnx_runtimes.batching import BatchEngine

    engine = BatchEngine.load(tiny_export)
    measured = engine_round.step_ms(engine, 8, rows=3)  # a real step of 3 rows over 8 positions
    assert measured > 0 and engine._batch.rows == 0
    monkeypatch.setattr(engine_round, "step_ms", lambda _engine, width: 5.0 + 0.25 * width)
    medians, fixed, per_position = engine_round.width_cost(engine, repeats=2)
    assert list(medians) == list(engine_round.WIDTHS)
    assert np.isclose(fixed, 5.0) and np.isclose(per_position, 0.25)


def test_serve_options_reports_cpu_seconds_per_round_by_role(monkeypatch: pytest.MonkeyPatch) -> None:
    """What each role spent between two readings, per round; the cores' seconds nobody used; medians over repeats
    in the table, under the tokens/s rows."""
    import benchmarks.serve_options as options

    monkeypatch.setattr(options.os, "cpu_count", lambda: 2)
    before = {"replica": 10.0, "load generator": 1.0}
    after = {"replica": 25.0, "load generator": 2.5, "Serve proxy": 0.5}  # a process first seen after
    per_round = options.cpu_per_round(before, after, wall=9.0, rounds=3)
    assert per_round == {"replica": 5.0, "load generator": 0.5, "Serve proxy": 0.17, "unused": 0.33}
    medians = options.cpu_summary({"a": [per_round, {**per_round, "replica": 7.0}, {**per_round, "replica": 6.0}]})
    assert medians["a"]["replica"] == 6.0
    assert list(medians["a"]) == ["replica", "Serve proxy", "load generator", "unused"]
    machine = {"cpu": "CPU", "cpus": 2, "platform": "p", "load_before": [0.1], "load_after": [0.2], "onnxruntime": "1"}
    settings = {"clients": 16, "requests": 48, "rounds": 3, "repeats": 3, "max_tokens": 32}
    summary = options.summary({"a": [[100.0], [100.0], [100.0]]})
    results = {"export": "e", "options": {"a": ""}, "settings": settings, "machine": machine, "variants": summary}
    assert "CPU seconds per round" not in options.table(results)  # older runs did not record it
    text = options.table(results | {"cpu_per_round": medians})
    assert "| CPU seconds per round | replica | Serve proxy | load generator | unused |" in text
    assert "| a | 6.00 | 0.17 | 0.50 | 0.33 |" in text


def test_kernel_times_counts_each_node_with_its_run(tmp_path: Path) -> None:
    """A prompt's last layer runs on one position and the head's input is 2-D in every run: the run's attention,
    not the node's own input, says whether it was a prompt's or a step's."""
    import json

    from benchmarks.serve_engine_round import kernel_times

    def node(op: str, ts: int, dims: list[int], dur: int = 1000) -> dict[str, object]:
        shape = {"args": {"op_name": op, "input_type_shape": [{"float": dims}]}}
        return {"cat": "Node", "name": f"{op}_{ts}_kernel_time", "ts": ts, "dur": dur, **shape}

    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},  # a 5-token prompt
        node("MatMulNBits", 10, [1, 5, 64]),
        node("GroupQueryAttention", 20, [1, 5, 192]),
        node("MatMulNBits", 30, [1, 1, 64]),  # the last layer past its attention: the last position alone
        node("MatMulNBits", 40, [1, 64], dur=2000),  # the head
        {"cat": "Session", "name": "model_run", "ts": 200, "dur": 100},  # a step of 16 rows
        node("MatMulNBits", 210, [16, 1, 64]),
        node("GroupQueryAttention", 220, [16, 1, 192]),
        node("If", 235, [], dur=4500),  # the head's If: its time is the nodes' of its branch
        node("MatMulNBits", 240, [16, 64], dur=4000),  # the head
        node("Gemm", 400, [16, 1, 64]),  # outside every run: its own input decides
    ]
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(events))
    assert kernel_times(profile) == {
        "prompt": {"MatMulNBits": 4.0, "GroupQueryAttention": 1.0},
        "step": {"MatMulNBits": 5.0, "GroupQueryAttention": 1.0, "Gemm": 1.0},
    }


def test_serve_peers_warms_each_server_with_a_whole_round_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first round of requests a server has not seen is its slowest, so the warm-up sends all of a round's
    requests by default; ``warm_up`` sends its first N (runs before 2026-12-05: 16)."""
    import benchmarks.serve_peers as serve_peers

    sent: list[tuple[str, str, int]] = []

    class Stand:
        def __init__(self, url: str) -> None:
            self.url = url

        def start(self) -> None: ...

        def stop(self) -> None: ...

    def one_round(url: str, bodies: list[dict[str, Any]], clients: int, extra: dict[str, Any], into: Any) -> None:
        sent.append((url, into.system, len(bodies)))

    monkeypatch.setattr(serve_peers, "one_round", one_round)
    monkeypatch.setattr(serve_peers.time, "sleep", lambda seconds: None)
    servers: dict[str, Any] = {"gpt2-onnx": Stand("ours"), "llama.cpp": Stand("theirs")}
    bodies = [{"prompt": str(n)} for n in range(48)]
    serve_peers.measure_pair(servers, bodies, clients=16, rounds=2)
    assert sent[:2] == [("ours", "warm-up", 48), ("theirs", "warm-up", 48)]
    assert sorted(sent[2:]) == [("ours", "gpt2-onnx", 48)] * 2 + [("theirs", "llama.cpp", 48)] * 2
    sent.clear()
    serve_peers.measure_pair(servers, bodies, clients=16, rounds=1, warm_up=16)
    assert sent[:2] == [("ours", "warm-up", 16), ("theirs", "warm-up", 16)]
