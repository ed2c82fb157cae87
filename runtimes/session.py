"""Load an export folder through its manifest into one ONNX Runtime session per graph, checked against the manifest.

A folder is refused (one-line :class:`ManifestError`) when a file is missing or has another size or (unless
``RuntimeOptions.integrity`` turns it off) another sha256 than the manifest states, when a graph's external data
points outside the folder or disagrees with the manifest's ``weights_index``, when the graphs' inputs or outputs
differ from the manifest, or when the graphs come from different exports.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import onnx

from gpt2_onnx.errors import (
    Gpt2OnnxError,
    InferenceError,
    InvalidInputError,
    ManifestError,
    RuntimeVersionError,
    first_line,
)
from gpt2_onnx.integrity import IntegrityCheck, check_file_hashes
from gpt2_onnx.manifest import Manifest, read_manifest
from gpt2_onnx.names import GRAPHS, GraphKind
from gpt2_onnx.versions import version_tuple
from gpt2_onnx.weights_index import check_index_covers
from runtimes.providers import ProviderName, check_session_provider, ensure_provider_loadable, provider_list
from runtimes.shared_weights import DISABLE_PREPACKING, SharedWeights

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["LoadedExport", "RuntimeOptions"]

log = logging.getLogger(__name__)

_ORT_TYPES = {"int64": "tensor(int64)", "float32": "tensor(float)", "float16": "tensor(float16)"}
_OPT_LEVELS = ("disable", "basic", "extended", "all")


@dataclass(frozen=True)
class RuntimeOptions:
    """How sessions are created."""

    provider: ProviderName = "cpu"
    intra_op_threads: int | None = None  # None: ONNX Runtime's default (one per physical core)
    inter_op_threads: int | None = None
    graph_optimization: Literal["disable", "basic", "extended", "all"] = "all"
    device_id: int = 0  # CUDA device
    session_config: Mapping[str, str] = field(default_factory=dict)  # extra SessionOptions config entries
    log_severity: int = 3  # ONNX Runtime's own log level: 0 verbose … 3 error, 4 fatal
    # CPU: map the weights file once and give both sessions its tensors, without prepacking (see shared_weights).
    # False: ONNX Runtime loads each session's weights itself (prepacked copies per session; more memory).
    share_weights: bool = True
    # Every file hashed against the manifest's sha256 before the sessions exist (gpt2_onnx.integrity).
    integrity: IntegrityCheck = field(default_factory=IntegrityCheck)

    def __post_init__(self) -> None:
        if self.graph_optimization not in _OPT_LEVELS:
            raise InvalidInputError(f"graph_optimization must be one of {', '.join(_OPT_LEVELS)}")
        for name in ("intra_op_threads", "inter_op_threads"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidInputError(f"{name} must be >= 0 (0: ONNX Runtime's default), got {value}")


def _session_options(options: RuntimeOptions) -> ort.SessionOptions:
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
    return so


def _shares_weights(options: RuntimeOptions, manifest: Manifest) -> bool:
    """Shared weights for float32 graphs on the CPU only: a CUDA session copies its weights to the GPU anyway, and
    quantized graphs need prepacking (MatMulNBits runs ~30× slower without it). Not when the caller sets
    prepacking itself."""
    return (
        options.share_weights
        and options.provider == "cpu"
        and manifest.precision == "float32"
        and DISABLE_PREPACKING not in options.session_config
    )


def _check_files(folder: Path, manifest: Manifest, check_sizes: bool) -> None:
    inside = folder.resolve()
    for name, record in manifest.files.items():
        path = folder / name
        if not path.is_file():
            raise ManifestError(f"'{folder}' lacks {name}, which its manifest lists")
        if path.resolve().parent != inside:
            raise ManifestError(f"{path} is a link to '{path.resolve()}', outside the export folder")
        if not check_sizes:
            continue
        size = path.stat().st_size
        if size != record.size:
            raise ManifestError(f"{path} has {size} bytes but the manifest says {record.size} (changed or truncated)")


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a graph holds: initializers, sparse initializers' parts, and tensors in node attributes
    (``Constant`` values, subgraphs of ``If``/``Loop``/``Scan``), recursively."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("sparse_tensor"):
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            for sparse in attribute.sparse_tensors:
                yield sparse.values
                yield sparse.indices
            if attribute.HasField("g"):
                yield from _graph_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graph_tensors(subgraph)


def _check_external_data(graph: onnx.ModelProto, manifest: Manifest, path: Path) -> None:
    """Every external tensor, wherever the graph holds it, must live in the manifest's weights file: no paths out
    of the folder reach ONNX Runtime."""
    for tensor in _graph_tensors(graph.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        if location != manifest.weights_file:
            raise ManifestError(
                f"{path.name}: tensor '{tensor.name}' points at external data '{location}', "
                f"not the export's weights file '{manifest.weights_file}'"
            )


def _graph_export_id(graph: onnx.ModelProto) -> str | None:
    return next((prop.value for prop in graph.metadata_props if prop.key == "gpt2_onnx.export_id"), None)


def _check_io(session: ort.InferenceSession, manifest: Manifest, kind: GraphKind, path: Path) -> None:
    record = manifest.graphs[kind]
    for label, got, specs in (
        ("inputs", session.get_inputs(), record.inputs),
        ("outputs", session.get_outputs(), record.outputs),
    ):
        have = [(arg.name, arg.type) for arg in got]
        want = [(spec.name, _ORT_TYPES.get(spec.dtype, spec.dtype)) for spec in specs]
        if have != want:
            diff = next(
                (f"{h} vs {w}" for h, w in zip(have, want, strict=False) if h != w),
                f"{len(have)} vs {len(want)}",
            )
            raise ManifestError(f"{path.name}: {label} do not match manifest.json (graph vs manifest: {diff})")


def _check_runtime_version(manifest: Manifest) -> None:
    import onnxruntime as ort

    if version_tuple(ort.__version__) < version_tuple(manifest.min_onnxruntime):
        raise RuntimeVersionError(
            f"this export needs onnxruntime >= {manifest.min_onnxruntime}, but {ort.__version__} is installed; "
            "upgrade onnxruntime"
        )


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


class LoadedExport:
    """An export folder with one ONNX Runtime session per graph. Sessions allow concurrent ``run`` calls."""

    def __init__(
        self,
        folder: Path,
        manifest: Manifest,
        sessions: dict[GraphKind, ort.InferenceSession],
        options: RuntimeOptions,
        shared_weights: SharedWeights | None = None,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.sessions = sessions
        self.options = options
        self.shared_weights = shared_weights  # the sessions' initializers point into it: it must live as long

    @classmethod
    def load(
        cls, folder: str | Path, options: RuntimeOptions | None = None, check_file_sizes: bool = True
    ) -> LoadedExport:
        """Read the manifest, check the files against it and create both sessions on the requested provider.

        ``check_file_sizes=False`` skips only the size comparison (``verify`` hashes the files itself and reports
        a mismatch alongside what parity finds); missing files are refused either way.
        """
        import onnxruntime as ort

        options = options or RuntimeOptions()
        folder = Path(folder)
        manifest = read_manifest(folder)
        _check_runtime_version(manifest)
        _check_files(folder, manifest, check_file_sizes)
        check_file_hashes(folder, manifest, options.integrity)
        providers = provider_list(options.provider)
        ensure_provider_loadable(options.provider)
        export_id = manifest.export.get("export_id")
        sessions: dict[GraphKind, ort.InferenceSession] = {}
        shared = SharedWeights(folder / manifest.weights_file) if _shares_weights(options, manifest) else None
        for kind in GRAPHS:
            path = folder / manifest.graphs[kind].file
            try:
                graph = onnx.load(str(path), load_external_data=False)
            except Exception as exc:  # protobuf's DecodeError and OSError alike
                raise ManifestError(f"{path} is not a readable ONNX graph: {exc}") from exc
            _check_external_data(graph, manifest, path)
            if manifest.weights_index:  # what C++/C# consumers map must be what the graphs read
                check_index_covers(manifest.weights_index, graph, path)
            if export_id is not None and _graph_export_id(graph) != export_id:
                raise ManifestError(f"{path.name} belongs to another export than manifest.json (export ids differ)")
            session_options = _session_options(options)
            if shared is not None:
                shared.add_to(session_options, graph, path)
            del graph
            provider_options = [{"device_id": str(options.device_id)}] if options.provider == "cuda" else None
            try:
                with _provider_failures_quiet(options.provider):
                    session = ort.InferenceSession(
                        str(path),
                        session_options,
                        providers=providers,
                        provider_options=provider_options,
                    )
            except Exception as exc:  # onnxruntime's pybind errors share no base class we can import portably
                raise Gpt2OnnxError(f"ONNX Runtime cannot load {path.name}: {first_line(exc)}") from exc
            check_session_provider(session.get_providers(), options.provider, path.name)
            _check_io(session, manifest, kind, path)
            sessions[kind] = session
        return cls(folder, manifest, sessions, options, shared)

    def run(self, kind: GraphKind, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One plain run of a graph: numpy in, numpy out (by output name)."""
        session = self.sessions[kind]
        names = [out.name for out in session.get_outputs()]
        with onnxruntime_errors(self.manifest.graphs[kind].file):
            values = session.run(names, dict(feeds))
        return dict(zip(names, values, strict=True))
