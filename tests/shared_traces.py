"""Traces shared by the test run's worker processes.

Tracing a tiny model's graph takes seconds (torch.export and its symbolic shapes); the rest of an export, a fraction
of that. The session's exports that share work (``tests.helpers.session_export_work``) keep each trace in a folder of
the run, keyed by what the trace is a function of: the model's weights and configuration (not its path, nor its
generation_config.json), the graph, the opset and the logits kept. The first worker to need one traces it and
writes it there; the others, and the same worker's next checkpoint of equal weights, read it.

Every process gets a trace back from the file, its maker too, so that a trace is the same object whichever worker
made it: test_export_structure's comparison of a shared export with an export of its own, byte for byte, is then
also the check that a trace read back from its file exports as the trace itself does."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir
from filelock import FileLock

from gpt2_onnx.app.export import SharedExportWork
from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.names import GraphKind
from gpt2_onnx_exporters.source import SourceModel
from gpt2_onnx_exporters.trace import TraceCache

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

FOLDER_VARIABLE = "GPT2_ONNX_TEST_TRACES"  # set by conftest.py for the run: the folder the workers share
_NOT_THE_FUNCTION = ("_name_or_path", "transformers_version")  # where the checkpoint came from, not what it computes


def model_fingerprint(model: GPT2LMHeadModel) -> str:
    """A digest of what a trace of ``model`` depends on: its configuration and every tensor of its state."""
    import torch

    digest = hashlib.sha256()
    config = {key: value for key, value in model.config.to_dict().items() if key not in _NOT_THE_FUNCTION}
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().contiguous().flatten().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


class RunTraceCache(TraceCache):
    """A :class:`TraceCache` whose first trace of each graph comes from the run's folder (traced and written there
    by whichever process needed it first, under a lock)."""

    def __init__(self, model: GPT2LMHeadModel, folder: Path) -> None:
        super().__init__(model)
        self._folder = folder
        self._fingerprint: str | None = None

    def _first_trace(self, kind: GraphKind, dims: ModelDims, opset: int, all_logits: bool) -> ir.Model:
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model)
        stem = f"{self._fingerprint}-{kind}-opset{opset}" + ("-all-logits" if all_logits else "")
        graph, names, done = (self._folder / f"{stem}{suffix}" for suffix in (".onnx", ".names", ".done"))
        self._folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self._folder / f"{stem}.lock")):
            if not done.exists():  # a maker that crashed left no mark: trace again
                traced = super()._first_trace(kind, dims, opset, all_logits)
                graph.write_bytes(ir.serde.serialize_model(traced).SerializeToString())
                # The names the trace gave out: the passes' new names must follow on as they do on the trace.
                names.write_bytes(pickle.dumps(traced.graph._name_authority))
                done.touch()
        model = ir.serde.deserialize_model(onnx.load_model_from_string(graph.read_bytes()))
        model.graph._name_authority = pickle.loads(names.read_bytes())  # written by this run, read by it
        return model


class RunExportWork(SharedExportWork):
    """The session's shared export work, its traces kept in the run's folder (:class:`RunTraceCache`)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self._folder = folder

    def _trace_cache(self, source: SourceModel) -> TraceCache:
        return RunTraceCache(source.model, self._folder)
