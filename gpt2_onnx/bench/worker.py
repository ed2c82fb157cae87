"""A bench worker: one system in its own process, driven by JSON lines on stdin, answering on stdout.

``python -m gpt2_onnx.bench.worker``; the first line names the system and the settings. The ONNX worker never
imports torch, so its memory figures are ONNX Runtime's alone. Anything a library prints goes to stderr:
stdout carries the protocol only.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

import numpy as np

from gpt2_onnx.bench.memory import memory_snapshot
from gpt2_onnx.bench.protocol import BenchSystem
from gpt2_onnx.bench.settings import BenchSettings, SystemSpec
from gpt2_onnx.errors import first_line

__all__ = ["main"]


def _build(spec: SystemSpec, settings: BenchSettings) -> BenchSystem:
    if spec.factory is not None:
        module, _, name = spec.factory.partition(":")
        built: BenchSystem = getattr(importlib.import_module(module), name)(spec, settings)
        return built
    if spec.kind == "onnx":
        from runtimes.bench_system import OnnxSystem

        assert spec.folder is not None  # the runner sets it for onnx systems
        return OnnxSystem(
            Path(spec.folder), settings.threads, settings.provider, spec.layout, spec.share_weights, spec.session_config
        )
    from exporters.eager_system import EagerSystem

    assert spec.model is not None  # the runner sets it for eager systems
    device = "cuda" if settings.provider == "cuda" else "cpu"
    return EagerSystem(spec.model, spec.seed or 0, settings.threads, device, settings.attention)


def _handle(system: BenchSystem, request: dict[str, Any]) -> dict[str, Any]:
    command = request["cmd"]
    ids = np.asarray(request.get("ids", []), dtype=np.int64)  # (B, T)
    before = request.get("before")
    if before:  # an untimed generation first: the timed call follows its decode steps, as in use
        system.generate(np.asarray(before["ids"], dtype=np.int64), int(before["new_tokens"]))
    if command == "load":
        before = memory_snapshot()
        start = time.perf_counter()
        system.load()
        answer: dict[str, Any] = {"load_s": time.perf_counter() - start, "before": before, "after": memory_snapshot()}
        # Ready: both graphs run once (a prefill and one decode step), so mapped weights are resident.
        system.generate(ids, 2)
        answer["ready"] = memory_snapshot()
        files = getattr(system, "graph_files", None)
        if files is not None:
            answer["files"] = files()
        return answer
    if command == "prefill":
        return {"s": system.prefill(ids)}
    if command == "generate":
        return system.generate(ids, int(request["new_tokens"])).to_json()
    if command == "memory":
        return memory_snapshot()
    raise ValueError(f"unknown bench command '{command}'")


def serve(system: BenchSystem, requests: IO[str], answers: IO[str]) -> None:
    """Answer each request line with one line: the result, or ``{"error": ...}`` (and keep serving)."""
    for line in requests:
        request = json.loads(line)
        if request.get("cmd") == "exit":
            return
        try:
            answer = _handle(system, request)
        except Exception as exc:  # reported to the parent, which raises a typed error with this text
            traceback.print_exc(file=sys.stderr)
            answer = {"error": f"{type(exc).__name__}: {first_line(exc)}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints (C or Python) land on stderr
    sys.stdout = sys.stderr
    first = json.loads(sys.stdin.readline())
    spec, settings = SystemSpec.from_json(first["system"]), BenchSettings.from_json(first["settings"])
    system = _build(spec, settings)
    protocol_out.write(json.dumps({"ready": True, "memory": memory_snapshot()}) + "\n")
    protocol_out.flush()
    serve(system, sys.stdin, protocol_out)


if __name__ == "__main__":
    main()
