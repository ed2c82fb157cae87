"""The application layer: the workflows that drive both adapters.

    gpt2_onnx.cli ──► gpt2_onnx.app ──► gpt2_onnx_exporters (PyTorch side: loading, tracing, graph transforms)
                                   └──► gpt2_onnx_runtimes  (ONNX Runtime side: sessions, KV cache, generation)
    everything ─────► gpt2_onnx_core (names, config, errors, manifest, tolerances, golden rules, bench protocol)

It also puts the runtime behind a service (``serving``, ``openai_api``: an OpenAI-compatible HTTP API on Ray Serve,
with the ``serve`` extra): Ray and FastAPI are imported here and nowhere else.

Only this package imports both adapters; the adapters import the core alone, never each other; the core imports
neither (``tests/test_layers.py`` checks every import, those inside functions too). Modules here import what they
use at the top: importing one of them costs what it uses, so the CLI imports them per command.
"""
