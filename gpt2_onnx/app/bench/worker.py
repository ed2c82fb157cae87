"""A bench worker: one system in its own process, driven by JSON lines on stdin, answering on stdout.

``python -m gpt2_onnx.app.bench.worker``; the first line names the system and the settings. The ONNX worker never
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
from typing import IO, Any

import numpy as np

from gpt2_onnx.app.bench.memory import memory_snapshot
from gpt2_onnx_core.bench_protocol import BenchSystem
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.errors import Gpt2OnnxError, first_line

__all__ = ["main"]


# Each system kind's factory, called with (spec, settings) in the worker, like a peer's SystemSpec.factory. They are
# imported by name, per worker: an ONNX Runtime worker never imports torch (its memory figures are ONNX Runtime's
# alone), and a peer's environment never imports this project's adapters.
FACTORIES = {
    "onnx": "gpt2_onnx_runtimes.bench_system:OnnxSystem.from_spec",
    "eager": "gpt2_onnx_exporters.eager_system:EagerSystem.from_spec",
}


def _build(spec: SystemSpec, settings: BenchSettings) -> BenchSystem:
    module, _, name = (spec.factory or FACTORIES[spec.kind]).partition(":")
    factory: Any = importlib.import_module(module)
    for part in name.split("."):
        factory = getattr(factory, part)
    built: BenchSystem = factory(spec, settings)
    return built


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


def error_answer(exc: Exception) -> dict[str, str]:
    """The answer for a failed request: gpt2-onnx's own errors by their class (the parent raises the same class,
    so bench exits with the code run and verify give for it), anything else by its type and message."""
    traceback.print_exc(file=sys.stderr)
    if isinstance(exc, Gpt2OnnxError):
        return {"error": first_line(exc), "error_class": type(exc).__name__}
    return {"error": f"{type(exc).__name__}: {first_line(exc)}"}


def serve(system: BenchSystem, requests: IO[str], answers: IO[str]) -> None:
    """Answer each request line with one line: the result, or ``{"error": ...}`` (and keep serving)."""
    for line in requests:
        request = json.loads(line)
        if request.get("cmd") == "exit":
            return
        try:
            answer = _handle(system, request)
        except Exception as exc:  # reported to the parent, which raises a typed error with this text
            answer = error_answer(exc)
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints (C or Python) land on stderr
    sys.stdout = sys.stderr
    first = json.loads(sys.stdin.readline())
    spec, settings = SystemSpec.from_json(first["system"]), BenchSettings.from_json(first["settings"])
    try:
        system = _build(spec, settings)
    except Exception as exc:  # a folder that cannot load, a provider that is not here: the parent's typed error
        protocol_out.write(json.dumps(error_answer(exc)) + "\n")
        protocol_out.flush()
        return
    protocol_out.write(json.dumps({"ready": True, "memory": memory_snapshot()}) + "\n")
    protocol_out.flush()
    serve(system, sys.stdin, protocol_out)


if __name__ == "__main__":
    main()
