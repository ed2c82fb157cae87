"""Creating ONNX Runtime sessions on exactly the provider asked for, and ONNX Runtime's errors as typed ones."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpt2_onnx_core.errors import Gpt2OnnxError, InferenceError, first_line
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_runtimes.providers import check_session_provider, provider_list
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["create_session", "onnxruntime_errors", "session_options_for"]


_SPINNING_ENTRIES = ("session.intra_op.allow_spinning", "session.force_spinning_stop")  # ONNX Runtime config keys


def session_options_for(options: RuntimeOptions, beside_another_session: bool = False) -> ort.SessionOptions:
    """ONNX Runtime's SessionOptions for ``options``: optimization level, thread counts, log level, config entries.

    ``beside_another_session``: the session shares the cores with another (the split layout's prefill and decode
    sessions, the prompt kernel's prompt and step sessions, a folder graph's session beside the generation
    session), so its threads spin between a run's operators and stop as soon as the run returns
    (``session.force_spinning_stop`` 1), unless ``options.session_config`` sets either spinning entry itself.

    Spinning on after its run, either session's threads took the cores from the other's next run. GPT-2-small,
    2 threads, Intel Xeon: with the prompt kernel (int4), a prompt of 128 right after a decode step took 54-56 ms with
    the step session's threads still spinning against 30-34 ms stopped (AMD EPYC, an earlier run: decode 6.3 against
    5.2 ms/token with the prompt session spinning); in the split layout, time to first token 131 against 109-110 ms
    (int4) and 176-181 against 152-154 ms (fp32), decode 7.2-7.4 against 6.3-6.4 ms/token (int4) and 35.7 against
    34.6-34.8 (fp32). With spinning off altogether, each of a prompt's ~180 operators woke the threads from sleep:
    37-41 ms against 31-36 ms. The merged layout's one session keeps ONNX Runtime's default: stopping made no
    difference there."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    so.graph_optimization_level = levels[options.graph_optimization]
    if options.intra_op_threads is not None:
        so.intra_op_num_threads = options.intra_op_threads
    if options.inter_op_threads is not None:
        so.inter_op_num_threads = options.inter_op_threads
    so.log_severity_level = options.log_severity
    for key, value in options.session_config.items():
        so.add_session_config_entry(key, value)
    if beside_another_session and not any(key in options.session_config for key in _SPINNING_ENTRIES):
        so.add_session_config_entry("session.force_spinning_stop", "1")
    return so


@contextlib.contextmanager
def _provider_failures_quiet(provider: ProviderName) -> Iterator[None]:
    """Keep ONNX Runtime's own multi-line log of a provider that fails to load off stderr while a session is
    created: :func:`check_session_provider` reports that failure as one typed error. ONNX Runtime's default
    logger is process-wide; it goes back to ONNX Runtime's default (warnings) afterwards."""
    if provider == "cpu":
        yield
        return
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # fatal only
    try:
        yield
    finally:
        ort.set_default_logger_severity(2)


@contextlib.contextmanager
def onnxruntime_errors(what: str) -> Iterator[None]:
    """Turn an exception from an ONNX Runtime call into an :class:`InferenceError` naming ``what`` ran."""
    try:
        yield
    except Exception as exc:  # onnxruntime's pybind errors share no importable base class
        raise InferenceError(f"ONNX Runtime failed running {what}: {first_line(exc)}") from exc


def create_session(
    model: str | bytes, session_options: ort.SessionOptions, options: RuntimeOptions, what: str
) -> ort.InferenceSession:
    """One session on the provider asked for, or a typed error; never a session that quietly runs elsewhere."""
    import onnxruntime as ort

    provider_options = [{"device_id": str(options.device_id)}] if options.provider == "cuda" else None
    try:
        with _provider_failures_quiet(options.provider):
            session = ort.InferenceSession(
                model, session_options, providers=provider_list(options.provider), provider_options=provider_options
            )
    except Exception as exc:  # onnxruntime's pybind errors share no base class we can import portably
        raise Gpt2OnnxError(f"ONNX Runtime cannot load {what}: {first_line(exc)}") from exc
    check_session_provider(session.get_providers(), options.provider, what)
    return session
