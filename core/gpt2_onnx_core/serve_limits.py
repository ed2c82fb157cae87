"""The serving limits' defaults, each written once: the batching engine's (:class:`EngineOptions`), the HTTP
layer's (:class:`ApiSettings`), ``gpt2-onnx serve``'s flags and a Serve config file's args all read them here."""

from __future__ import annotations

__all__ = ["MAX_BATCH_ROWS", "MAX_BODY_BYTES", "MAX_WAITING", "REQUEST_TIMEOUT_S"]

MAX_BATCH_ROWS = 16  # rows (choices) decoded together by one replica
MAX_WAITING = 64  # requests waiting for rows per replica; one more is refused at once (503)
REQUEST_TIMEOUT_S = 300.0  # a request's whole time, queue included; then 504
MAX_BODY_BYTES = 1 << 20  # larger request bodies are refused (413) before they are read
