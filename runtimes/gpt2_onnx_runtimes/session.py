"""Load an export folder through its manifest into ONNX Runtime sessions, checked against the manifest.

Two layouts (:class:`RuntimeOptions.layout`):

    merged  one session over the generation graph that :mod:`gpt2_onnx_runtimes.generation_graph` builds from
            decode.onnx at load time: prefill is decode with an empty past. The weights are prepacked once, one
            thread pool serves every step, and on the CPU the fp32 embedding is read from one map of the weights
            and the KV cache is written in place (``in_place_kv``: gpt2_onnx_runtimes.inplace_attention).
    split   prefill.onnx and decode.onnx in a session each, as shipped (what C++, C# and onnxruntime-genai
            consumers run). On the CPU, fp32 sessions share one map of the weights with prepacking off
            (``share_weights``), else ONNX Runtime loads and prepacks each session's weights itself.

``auto`` (the default) is ``merged`` where the installed ONNX Runtime can load a graph from memory with its
weights beside it (:data:`gpt2_onnx_core.compatibility.MERGED_LAYOUT_MIN_ONNXRUNTIME`), else ``split``. Whatever the
layout, :meth:`LoadedExport.run` runs the folder's own graphs, creating their sessions on first use in the merged
layout.

A folder is refused (one-line :class:`ManifestError`) when a file is missing or has another size or (unless
``RuntimeOptions.integrity`` turns it off) another sha256 than the manifest states, when a graph's external data
points outside the folder or disagrees with the manifest's ``weights_index``, when the graphs' inputs or outputs
differ from the manifest, or when the graphs come from different exports.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np
import onnx

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.names import DECODE, EMBEDDING, GRAPHS, PREFILL, GraphKind
from gpt2_onnx_core.precisions import precision_named
from gpt2_onnx_core.weights_index import external_tensors
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.folder_checks import check_graph, read_graph
from gpt2_onnx_runtimes.generation_graph import (
    TRANSPOSED_TABLE,
    initializer_as_input,
    last_layer_at_last_position,
    last_position_logits,
    single_row_head,
)
from gpt2_onnx_runtimes.inplace_attention import in_place_graph, probe_names, refuse_in_place_split
from gpt2_onnx_runtimes.kv_bindings import KeptBindings
from gpt2_onnx_runtimes.kv_buffers import BufferPool
from gpt2_onnx_runtimes.kv_scales import calibration_ids, default_calibration_text, measure_cache_scales
from gpt2_onnx_runtimes.mapped_pages import release_free_heap, release_private_maps
from gpt2_onnx_runtimes.ort_sessions import create_session, onnxruntime_errors, session_options_for
from gpt2_onnx_runtimes.prompt_attention import float_prompt_attention
from gpt2_onnx_runtimes.prompt_kernel import check_prompt_kernel, dynamic_prompt_graph
from gpt2_onnx_runtimes.providers import ensure_provider_loadable, provider_list
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions, resolve_layout
from gpt2_onnx_runtimes.shared_weights import DISABLE_PREPACKING, SharedWeights

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["LoadedExport", "StepSessions", "check_folder"]

log = logging.getLogger(__name__)

_WEIGHTS_FOLDER = "session.model_external_initializers_file_folder_path"  # ONNX Runtime session config key


def _shares_weights(options: RuntimeOptions, manifest: Manifest) -> bool:
    """split layout: shared weights for float32 graphs on the CPU only: a CUDA session copies its weights to the
    GPU anyway, and quantized graphs need prepacking (MatMulNBits runs many times slower without it). Not when the
    caller sets prepacking itself."""
    return (
        options.share_weights
        and options.provider == "cpu"
        and precision_named(manifest.precision).float32
        and DISABLE_PREPACKING not in options.session_config
    )


def _maps_embedding(options: RuntimeOptions, manifest: Manifest) -> bool:
    """merged layout: the fp32 embedding read from one map on the CPU (on CUDA it must live on the GPU). Tied, it
    is the head's matrix too, which ONNX Runtime would otherwise prepack into a second copy; untied, only the
    Gather reads it, from the map as from ONNX Runtime's own load."""
    return options.provider == "cpu" and precision_named(manifest.precision).float32


def check_folder(folder: Path, manifest: Manifest, options: RuntimeOptions) -> dict[GraphKind, onnx.ModelProto]:
    """What loading checks before any session exists beyond the folder's files (which
    :class:`~gpt2_onnx_runtimes.export_folder.ExportFolder` checks): the provider, and each graph
    (:func:`~gpt2_onnx_runtimes.folder_checks.check_graph`). Returns the graphs, read without their weights."""
    provider_list(options.provider)
    ensure_provider_loadable(options.provider)
    resolve_layout(options)  # an unsupported layout is refused before the graphs are read
    graphs = {kind: read_graph(folder / manifest.graphs[kind].file) for kind in GRAPHS}
    for kind, graph in graphs.items():
        check_graph(graph, manifest, kind, folder / manifest.graphs[kind].file)
    return graphs


@dataclass(frozen=True)
class StepSessions:
    """What a generation runs: the session of each step, and the inputs bound on every run besides the tokens.

    In the merged layout both steps are one session, prefill feeds an empty past, and the logits are the last
    position's, (B, 1, V), however many tokens go in.
    """

    prefill: ort.InferenceSession
    decode: ort.InferenceSession
    prefill_takes_past: bool
    constant_inputs: Mapping[str, ort.OrtValue] = field(default_factory=dict)
    label: str = "split"
    # The generation graph writes the cache in place (gpt2_onnx_runtimes.inplace_attention): bound to one buffer,
    # past and present are (B, nh, capacity, hs); bound to separate ones, it concatenates as decode.onnx does.
    in_place: bool = False
    # The cache's elements: float32, or int8 where the in-place graph quantizes it (RuntimeOptions.kv_cache).
    cache_dtype: type[np.generic] = np.float32
    # The prefill session attends over a float32 cache of the prompt's own and returns each run's new keys and values
    # quantized, which the runner writes into the int8 cache: the int8 cache's prompt kernel
    # (gpt2_onnx_runtimes.prompt_attention).
    prefill_float_cache: bool = False

    def session(self, kind: GraphKind) -> ort.InferenceSession:
        return self.prefill if kind == PREFILL else self.decode


class LoadedExport:
    """An export folder loaded on one provider. Sessions allow concurrent runs; use as a context manager (or call
    :meth:`close`) to release the sessions and the weights map before the object goes away."""

    def __init__(
        self,
        folder: Path,
        manifest: Manifest,
        options: RuntimeOptions,
        steps: StepSessions,
        graph_sessions: dict[GraphKind, ort.InferenceSession],
        shared_weights: SharedWeights | None = None,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.options = options
        self._steps: StepSessions | None = steps
        self.layout = steps.label
        self._graph_sessions = graph_sessions
        self._lock = threading.Lock()
        self.shared_weights = shared_weights  # sessions' initializers point into it: it must live as long
        self.export: ExportFolder | None = None  # the opened folder (tokenizer, defaults), set by open
        self.kv_pool = BufferPool()  # the CPU KV buffers, reused by every generation on this model
        self.kv_bindings = KeptBindings()  # the in-place cache's bindings of those buffers (see kv_bindings)

    @classmethod
    def load(cls, folder: str | Path, options: RuntimeOptions | None = None) -> LoadedExport:
        """Open the folder (:class:`ExportFolder`: manifest, file checks under ``options.integrity``) and create
        the sessions of the layout asked for."""
        options = options or RuntimeOptions()
        return cls.open(ExportFolder.open(folder, options.integrity), options)

    @classmethod
    def from_manifest(cls, folder: Path, manifest: Manifest, options: RuntimeOptions) -> LoadedExport:
        """As :meth:`load`, against a manifest given in memory (an export checks its folder before writing one)."""
        return cls.open(ExportFolder.checked(folder, manifest, options.integrity), options)

    @classmethod
    def open(cls, export: ExportFolder, options: RuntimeOptions) -> LoadedExport:
        """Create the sessions of an opened folder (its files already checked) in the layout asked for."""
        folder, manifest = export.path, export.manifest
        check_prompt_kernel(manifest, options.prompt_kernel)
        graphs = check_folder(folder, manifest, options)
        layout = resolve_layout(options)
        if layout == "split":
            refuse_in_place_split(options.in_place_kv, options.kv_cache)
            if options.prompt_kernel != "export":
                raise InvalidInputError(
                    f"prompt_kernel '{options.prompt_kernel}' needs the merged layout, which this onnxruntime lacks"
                )
        loaded = cls._merged(export, options, graphs[DECODE]) if layout == "merged" else None
        if loaded is None:
            loaded = cls._split(folder, manifest, options, graphs)
        loaded.export = export
        release_free_heap()  # what parsing, rewriting and optimizing the graphs freed (gpt2_onnx_runtimes.mapped_pages)
        return loaded

    @classmethod
    def _split(
        cls, folder: Path, manifest: Manifest, options: RuntimeOptions, graphs: dict[GraphKind, onnx.ModelProto]
    ) -> LoadedExport:
        shared = SharedWeights(folder / manifest.weights_file) if _shares_weights(options, manifest) else None
        sessions = {
            kind: cls._graph_session(folder, manifest, options, kind, graph, shared) for kind, graph in graphs.items()
        }
        release_private_maps(folder / manifest.weights_file)  # what prepacking read (gpt2_onnx_runtimes.mapped_pages)
        steps = StepSessions(sessions[PREFILL], sessions[DECODE], prefill_takes_past=False)
        return cls(folder, manifest, options, steps, sessions, shared)

    @classmethod
    def _merged(cls, export: ExportFolder, options: RuntimeOptions, decode: onnx.ModelProto) -> LoadedExport:
        folder, manifest = export.path, export.manifest
        int8_cache = options.kv_cache == "int8"
        graph = last_position_logits(decode, manifest.graphs[DECODE].file)
        graph = last_layer_at_last_position(graph, manifest.dims, manifest.graphs[DECODE].file) or graph
        rewritten = in_place_graph(
            graph, manifest.dims, options.in_place_kv, options.provider, manifest.graphs[DECODE].file, int8_cache
        )
        in_place, graph = rewritten is not None, rewritten or graph
        del rewritten
        shared: SharedWeights | None = None
        constants: dict[str, ort.OrtValue] = {}
        if _maps_embedding(options, manifest):
            shared = SharedWeights(folder / manifest.weights_file)
            path = folder / manifest.graphs[DECODE].file
            ref = next((r for r in external_tensors(decode, path) if r.name == EMBEDDING), None)
            if ref is not None:
                graph = initializer_as_input(graph, EMBEDDING)
                constants[EMBEDDING] = shared.value(ref)  # (V, d), pointing into the map
                headed = single_row_head(graph, EMBEDDING) if options.single_row_head else None
                if headed is not None:  # a tied head: one row multiplies the table transposed (generation_graph)
                    graph = headed
                    constants[TRANSPOSED_TABLE] = shared.transposed(ref)  # (d, V), in memory
        session_options = session_options_for(options, beside_another_session=options.prompt_kernel == "dynamic")
        session_options.add_session_config_entry(_WEIGHTS_FOLDER, str(folder.resolve()))
        probes = probe_names(graph) if int8_cache else []
        prompt = None
        if options.prompt_kernel == "dynamic":  # first: its load's peak then sits on less of the process's memory
            shared = shared or SharedWeights(folder / manifest.weights_file)
            # With an int8 cache a prompt attends over a float32 cache and returns its new positions quantized.
            prompted = float_prompt_attention(graph, manifest.dims) if int8_cache else graph
            prompt = cls._prompt_session(folder, manifest, options, prompted, shared)
            del prompted
            # Both sessions read the tensors neither prepacks (the tied table's rows, norms, biases) from one map.
            shared.add_to(session_options, graph, folder / manifest.graphs[DECODE].file, prepacking=True)
        session = create_session(graph.SerializeToString(), session_options, options, "the generation graph")
        del graph
        release_private_maps(folder / manifest.weights_file)  # what prepacking read (gpt2_onnx_runtimes.mapped_pages)
        if prompt is not None and shared is not None:
            shared.release_resident()
        if int8_cache:
            constants.update(cls._cache_scales(export, options, session, probes, constants))
        steps = StepSessions(
            prompt or session,
            session,
            prefill_takes_past=True,
            constant_inputs=constants,
            label="merged",
            in_place=in_place,
            cache_dtype=np.int8 if int8_cache else np.float32,
            prefill_float_cache=prompt is not None and int8_cache,
        )
        return cls(folder, manifest, options, steps, {}, shared if constants or prompt else None)

    @staticmethod
    def _prompt_session(
        folder: Path,
        manifest: Manifest,
        options: RuntimeOptions,
        graph: onnx.ModelProto,
        shared: SharedWeights,
        kind: GraphKind = DECODE,
    ) -> ort.InferenceSession:
        """The session prompts run with ``prompt_kernel`` 'dynamic': ``graph`` with its projections through
        DynamicQuantizeMatMul (:mod:`gpt2_onnx_runtimes.prompt_kernel`), the same inputs and outputs; its other
        initializers are views of ``shared``, which must outlive the session. ``graph`` is built from the folder's
        ``kind`` graph."""
        path = folder / manifest.graphs[kind].file
        prompt = dynamic_prompt_graph(graph, folder / manifest.weights_file, path)
        session_options = session_options_for(options, beside_another_session=True)
        shared.add_to(session_options, prompt.model, path, prepacking=True, skip=prompt.names)
        prompt.add_to(session_options, {manifest.weights_file: shared.mapped()})
        serialized = prompt.model.SerializeToString()
        prompt.model.Clear()
        session = create_session(serialized, session_options, options, f"the prompt kernel's {path.name}")
        del prompt, serialized  # ONNX Runtime copied and prepacked the int8 weights while creating the session
        release_free_heap()
        shared.release_resident()  # the pages its copy read (the session's views fault back what a run reads)
        return session

    @staticmethod
    def _cache_scales(
        export: ExportFolder,
        options: RuntimeOptions,
        session: ort.InferenceSession,
        probes: list[str],
        constants: Mapping[str, ort.OrtValue],
    ) -> dict[str, ort.OrtValue]:
        """An int8 cache's scales, measured by the generation session itself on the calibration text
        (:mod:`gpt2_onnx_runtimes.kv_scales`), as the inputs every run binds."""
        import onnxruntime as ort

        dims = export.manifest.dims
        text = options.kv_calibration if options.kv_calibration is not None else default_calibration_text()
        ids = calibration_ids(export.encode_once, text, dims.n_positions)  # (1, n_positions)
        release_free_heap()  # the tokenizer that encode_once let go, before calibration's runs allocate after it
        scales = measure_cache_scales(session, probes, dims, ids, constants)
        return {name: ort.OrtValue.ortvalue_from_numpy(array) for name, array in scales.feeds().items()}

    @staticmethod
    def _graph_session(
        folder: Path,
        manifest: Manifest,
        options: RuntimeOptions,
        kind: GraphKind,
        graph: onnx.ModelProto,
        shared: SharedWeights | None,
    ) -> ort.InferenceSession:
        path = folder / manifest.graphs[kind].file
        session_options = session_options_for(options, beside_another_session=True)  # never the only session
        if shared is not None:
            shared.add_to(session_options, graph, path)
        return create_session(str(path), session_options, options, path.name)

    @property
    def steps(self) -> StepSessions:
        """The sessions generation runs (:class:`StepSessions`)."""
        if self._steps is None:
            raise InvalidInputError(f"the export '{self.folder}' was closed; load it again")
        return self._steps

    def graph_session(self, kind: GraphKind) -> ort.InferenceSession:
        """The session of the folder's own ``kind`` graph; in the merged layout created on first use. With
        ``prompt_kernel`` 'dynamic' its projections go through DynamicQuantizeMatMul as a prompt's do (what
        ``verify``'s graph checks and the perplexity then measure)."""
        self.steps  # noqa: B018  # refuses a closed export
        with self._lock:
            session = self._graph_sessions.get(kind)
            if session is None:
                graph = read_graph(self.folder / self.manifest.graphs[kind].file)
                if self.options.prompt_kernel == "dynamic":
                    self.shared_weights = self.shared_weights or SharedWeights(self.folder / self.manifest.weights_file)
                    session = self._prompt_session(
                        self.folder, self.manifest, self.options, graph, self.shared_weights, kind
                    )
                else:
                    session = self._graph_session(self.folder, self.manifest, self.options, kind, graph, None)
                release_private_maps(self.folder / self.manifest.weights_file)
                self._graph_sessions[kind] = session
            return session

    def run(self, kind: GraphKind, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One plain run of the folder's ``kind`` graph: numpy in, numpy out (by output name)."""
        session = self.graph_session(kind)
        names = [out.name for out in session.get_outputs()]
        with onnxruntime_errors(self.manifest.graphs[kind].file):
            values = session.run(names, dict(feeds))
        return dict(zip(names, values, strict=True))

    def providers(self) -> dict[str, list[str]]:
        """The providers each session created so far actually runs on, by step or graph."""
        if self._steps is None:
            return {}
        found = {"generation": self._steps.decode.get_providers()} if self.layout == "merged" else {}
        with self._lock:
            found.update({kind: session.get_providers() for kind, session in self._graph_sessions.items()})
        return found

    def close(self) -> None:
        """Release the sessions and the weights map (the object is unusable afterwards)."""
        with self._lock:
            self._graph_sessions.clear()
            self._steps = None
        self.shared_weights = None
        self.kv_pool.clear()
        self.kv_bindings.clear()

    def __enter__(self) -> LoadedExport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
