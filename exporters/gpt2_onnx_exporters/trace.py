"""Trace a :class:`Gpt2GraphModule` into an ONNX model with torch.onnx's dynamo exporter."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator
from copy import deepcopy
from typing import TYPE_CHECKING

import torch

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ExportError, first_line
from gpt2_onnx_core.names import (
    ATTENTION_MASK,
    DECODE,
    INPUT_IDS,
    POSITION_IDS,
    GraphKind,
    graph_inputs,
    graph_outputs,
)
from gpt2_onnx_exporters.graph_module import graph_module

if TYPE_CHECKING:
    import onnx_ir as ir
    from transformers import GPT2LMHeadModel

__all__ = ["TraceCache", "trace_graph"]

log = logging.getLogger(__name__)

# Example sizes for tracing. None may be 0 or 1: torch.export specialises such sizes into constants.
_EXAMPLE_BATCH, _EXAMPLE_NEW, _EXAMPLE_PAST = 2, 3, 4


def _example_inputs(kind: GraphKind, dims: ModelDims) -> tuple[object, ...]:
    past = _EXAMPLE_PAST if kind == DECODE else 0
    input_ids = torch.randint(0, dims.vocab_size, (_EXAMPLE_BATCH, _EXAMPLE_NEW), dtype=torch.int64)  # (B, T)
    attention_mask = torch.ones(_EXAMPLE_BATCH, past + _EXAMPLE_NEW, dtype=torch.int64)  # (B, P+T)
    position_ids = torch.arange(past, past + _EXAMPLE_NEW, dtype=torch.int64).expand(_EXAMPLE_BATCH, -1)  # (B, T)
    if kind != DECODE:
        return (input_ids, attention_mask, position_ids.contiguous())
    kv_shape = (_EXAMPLE_BATCH, dims.n_head, past, dims.head_dim)  # (B, nh, P, hs)
    kv = tuple(torch.randn(kv_shape) for _ in range(2 * dims.n_layer))
    return (input_ids, attention_mask, position_ids.contiguous(), kv)


def _dynamic_shapes(kind: GraphKind, dims: ModelDims) -> dict[str, object]:
    auto = torch.export.Dim.AUTO  # names and relations (total = past + new) are set after tracing
    shapes: dict[str, object] = {
        INPUT_IDS: {0: auto, 1: auto},
        ATTENTION_MASK: {0: auto, 1: auto},
        POSITION_IDS: {0: auto, 1: auto},
    }
    if kind == DECODE:
        shapes["past_key_values"] = tuple({0: auto, 2: auto} for _ in range(2 * dims.n_layer))
    return shapes


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """torch.onnx logs warnings about its own internals (opset conversion, missing torchvision) at WARNING level,
    and prints progress to stdout; neither is actionable for our fixed module, so both go to debug."""
    names = [
        "torch.onnx",
        *(n for n in logging.root.manager.loggerDict if n.startswith(("torch.onnx", "onnxscript"))),
    ]
    saved = {name: logging.getLogger(name).level for name in names}
    quiet = io.StringIO()
    try:
        for name in names:
            logging.getLogger(name).setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(quiet):
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        log.debug("torch.onnx output:\n%s", quiet.getvalue())


def trace_graph(model: GPT2LMHeadModel, kind: GraphKind, dims: ModelDims, opset: int, all_logits: bool) -> ir.Model:
    """Trace one graph. Input and output names come from :mod:`gpt2_onnx_core.names`; dimension names are set later."""
    module = graph_module(model, kind, all_logits)
    inputs = [spec.name for spec in graph_inputs(kind, dims)]
    outputs = [spec.name for spec in graph_outputs(kind, dims, all_logits)]
    try:
        with torch.no_grad(), _quiet_exporter():
            program = torch.onnx.export(
                module,
                _example_inputs(kind, dims),
                dynamo=True,
                opset_version=opset,
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes=_dynamic_shapes(kind, dims),
                optimize=True,
                verbose=False,
            )
    except Exception as exc:  # torch.onnx raises many unrelated types; all mean the same here
        raise ExportError(f"tracing the {kind} graph failed: {first_line(exc)}") from exc
    if program is None:
        raise ExportError(f"tracing the {kind} graph returned nothing")
    return program.model


class TraceCache:
    """Traced graphs of one loaded model, kept for several exports of it (scripts/make_fixtures.py exports fp32 and
    int4 from one load). Tracing is most of an export's time; a precision's passes run on the traced graph, so the
    same trace serves every precision that traces the model itself (not fp16, which traces a float16 copy).

    Each lookup returns a copy (the variants' passes change graphs in place) that names new values and nodes as the
    traced graph itself would: the graphs written are byte for byte those of an export that traced on its own."""

    def __init__(self, model: GPT2LMHeadModel) -> None:
        self.model = model  # held, so that its identity stays its own while the cache lives
        self._traced: dict[tuple[GraphKind, int, bool], ir.Model] = {}

    def trace(self, model: GPT2LMHeadModel, kind: GraphKind, dims: ModelDims, opset: int, all_logits: bool) -> ir.Model:
        """:func:`trace_graph`, or a copy of the graph traced before for this very model and settings."""
        if model is not self.model:
            return trace_graph(model, kind, dims, opset, all_logits)
        all_logits = all_logits and kind != DECODE  # decode returns every position's logits either way
        key = (kind, opset, all_logits)
        if key not in self._traced:
            self._traced[key] = self._first_trace(kind, dims, opset, all_logits)
        traced = self._traced[key]
        copy = traced.clone()
        # A clone starts its name counters afresh; the passes' new names must not depend on whether it is a copy.
        copy.graph._name_authority = deepcopy(traced.graph._name_authority)
        return copy

    def _first_trace(self, kind: GraphKind, dims: ModelDims, opset: int, all_logits: bool) -> ir.Model:
        """The graph this cache keeps for these settings: :func:`trace_graph` of its model. A subclass may take it
        from elsewhere (the test suite shares traces between its worker processes)."""
        return trace_graph(self.model, kind, dims, opset, all_logits)
