"""The application layer: what puts the runtime behind a service (an OpenAI-compatible HTTP API on Ray Serve).

Imported only where it is used (``gpt2-onnx serve`` imports it lazily): it needs the ``serve`` extra (Ray Serve,
FastAPI), which the core, the exporters and the runtime never import.
"""
