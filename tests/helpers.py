"""Small helpers shared by tests: running the command line as its console script does, reading graphs without
their weights, counting head-shaped tensors, editing a manifest, and reading what a failed command left behind (its
one error line, staging folders)."""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import onnx
from click.testing import CliRunner, Result

from gpt2_onnx.cli import main
from gpt2_onnx_core import interrupts
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import GRAPH_FILES, GraphKind

_MAIN_SETS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGXFSZ", None)) if s is not None)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
@click.pass_context
def _console_script(ctx: click.Context) -> None:
    main(ctx.args)  # every argument, untouched: this command has no options of its own


def invoke(*args: str, stdin: str | None = None, catch_exceptions: bool = False) -> Result:
    """``gpt2-onnx ARGS`` as the console script runs it (:func:`gpt2_onnx.cli.main`: errors mapped to one line and
    an exit code), its stdout and stderr captured by click's CliRunner.

    ``main`` owns the process's signal handlers (it records interrupts, and ignores them once interrupted); the
    test process gets its own back afterwards, with no interrupt left recorded."""
    saved = {signum: signal.getsignal(signum) for signum in _MAIN_SETS}
    try:
        return CliRunner().invoke(_console_script, list(args), input=stdin, catch_exceptions=catch_exceptions)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        interrupts._received.clear()


@functools.cache
def session_export_work() -> Any:
    """The session's one :class:`~gpt2_onnx.app.export.SharedExportWork`: exports that share it load each model
    (same spec, seed, tokenizer and revision) once and trace each of its graphs once, whatever precision or other
    options they export it with; the rest of each export (passes, files, golden vectors, parity check) is its own.
    Tracing is most of an export's time. What a shared trace writes is byte for byte what an export of its own
    writes (test_export_structure.py compares both ways), so tests whose subject is not loading or tracing share.
    Under pytest the traces are also shared with the run's other workers, and between checkpoints of equal weights
    (tests/shared_traces.py).
    Here, not in conftest.py: pytest imports conftest.py as ``conftest`` and a test's ``from tests.conftest import``
    imports it again, which would make a second cache."""
    from gpt2_onnx.app.export import SharedExportWork
    from tests.shared_traces import FOLDER_VARIABLE, RunExportWork

    folder = os.environ.get(FOLDER_VARIABLE)  # the run's, shared by its workers (tests/shared_traces.py)
    return RunExportWork(Path(folder)) if folder else SharedExportWork()


def load_graph(folder: Path, kind: GraphKind) -> onnx.ModelProto:
    return onnx.load(str(folder / GRAPH_FILES[kind]), load_external_data=False)


def vocab_by_d_initializers(model: onnx.ModelProto, vocab: int, d: int) -> list[str]:
    """Initializers shaped [vocab, d] or [d, vocab]: copies of the embedding would show up here."""
    return [t.name for t in model.graph.initializer if tuple(t.dims) in {(vocab, d), (d, vocab)}]


def external_locations(model: onnx.ModelProto) -> set[str]:
    locations = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations |= {e.value for e in tensor.external_data if e.key == "location"}
    return locations


def manifest_dims(folder: Path) -> tuple[int, int]:
    dims = read_manifest(folder).dims
    return dims.vocab_size, dims.n_embd


def edit_manifest(folder: Path, change: Callable[[dict[str, object]], None]) -> None:
    """Change manifest.json's JSON in place (no validation: tests plant bad manifests with it)."""
    data = json.loads((folder / "manifest.json").read_text())
    change(data)
    (folder / "manifest.json").write_text(json.dumps(data))


def leftovers(parent: Path) -> list[str]:
    """An export's staging and replaced-export folders left in ``parent``."""
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name)


def one_error_line(output: str) -> str:
    """The single ``Error:`` line of a command's output (asserting there is exactly one)."""
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    return errors[0]


def serve_schedule(engine: Any, schedule: list[tuple[int, list[int], int]]) -> list[list[int]]:
    """Drive a BatchEngine step by step: request i (``(step, prompt ids, new tokens)``) is submitted, greedy with
    end-of-text ignored, once ``step`` steps have run; returns each request's tokens in order."""
    from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec, Update
    from gpt2_onnx_runtimes.generation import GenerationOptions

    updates: list[list[Update]] = [[] for _ in schedule]
    pending, step = list(range(len(schedule))), 0
    while True:
        for index in [i for i in pending if schedule[i][0] <= step]:
            _, prompt, new = schedule[index]
            spec = CompletionSpec(tuple(prompt), GenerationOptions(max_new_tokens=new, ignore_eos=True), None)
            engine.submit(spec, updates[index].append)
            pending.remove(index)
        more = engine.step()
        step += 1
        if not more and not pending:
            break
        assert step < 1_000, "the engine never finished"
    return [[u.token_id for u in got if isinstance(u, ChoiceUpdate)] for got in updates]


SPINNING_ENTRIES = ("session.force_spinning_stop", "session.intra_op.allow_spinning")


def spinning_entries(session: Any) -> dict[str, str | None]:
    """An ONNX Runtime session's spinning config entries (:data:`SPINNING_ENTRIES`), None for an entry it does not
    have (ONNX Runtime raises RuntimeError for a missing key)."""
    options = session.get_session_options()
    found: dict[str, str | None] = {}
    for key in SPINNING_ENTRIES:
        try:
            found[key] = str(options.get_session_config_entry(key))
        except RuntimeError:
            found[key] = None
    return found
