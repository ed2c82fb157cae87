"""Reliability: interrupted and failing exports leave nothing behind, misuse gets precise errors, one loaded model
serves many threads, and nothing from a checkpoint or manifest reaches outside its folder."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest

from gpt2_onnx.errors import InvalidInputError, ManifestError
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.validation import validate_feeds
from tests.faults import save_graph
from tests.helpers import edit_manifest, invoke, leftovers, one_error_line

EXPORT = [sys.executable, "-m", "gpt2_onnx", "export"]


def wait_for_staging(parent: Path, process: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if leftovers(parent):
            return
        time.sleep(0.05)
    raise AssertionError("the export never started writing")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_export_leaves_nothing(tiny_checkpoint: Path, tmp_path: Path, signum: int) -> None:
    out = tmp_path / "out"
    process = subprocess.Popen(
        [*EXPORT, "--model", str(tiny_checkpoint), "-o", str(out)], stderr=subprocess.PIPE, text=True
    )
    wait_for_staging(tmp_path, process)
    time.sleep(1.0)  # well inside tracing
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Interrupted." in stderr and "Traceback" not in stderr
    assert not out.exists() and leftovers(tmp_path) == []


def test_full_disk_leaves_nothing(tiny_checkpoint: Path, tmp_path: Path) -> None:
    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))  # the weights file is 13 MB

    out = tmp_path / "out"
    done = subprocess.run(
        [*EXPORT, "--model", str(tiny_checkpoint), "-o", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "File too large" in one_error_line(done.stderr)
    assert not out.exists() and leftovers(tmp_path) == []


def test_forced_export_that_fails_keeps_the_old_export(
    tiny_export: Path, tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import gpt2_onnx.app.export as export_module
    from gpt2_onnx.errors import ExportCheckError

    out = tmp_path / "out"
    shutil.copytree(tiny_export, out)
    before = {p.name: p.stat().st_size for p in out.iterdir()}

    def failing_check(*args: object, **kwargs: object) -> None:
        raise ExportCheckError("simulated parity failure")

    monkeypatch.setattr(export_module, "_check_parity", failing_check)
    result = invoke("export", "--model", str(tiny_checkpoint), "-o", str(out), "--force")
    assert result.exit_code == 1 and "simulated parity failure" in result.output
    assert {p.name: p.stat().st_size for p in out.iterdir()} == before
    assert leftovers(tmp_path) == []


def test_unwritable_output_location(tmp_path: Path) -> None:
    result = invoke("export", "--model", "random:tiny", "-o", "/proc/gpt2-onnx-out")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("Error: cannot create a folder beside")


def test_interrupted_stream_flushes_the_text_so_far(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt2_onnx_runtimes import streaming

    original = streaming.stream_text

    def interrupted(*args: object, **kwargs: object) -> object:
        for index, chunk in enumerate(original(*args, **kwargs)):  # type: ignore[arg-type]
            if index == 3:
                raise KeyboardInterrupt
            yield chunk

    monkeypatch.setattr(streaming, "stream_text", interrupted)
    result = invoke("run", str(tiny_export), "-p", "Hello", "-n", "20", "--ignore-eos")
    expected = Gpt2Onnx.load(tiny_export).generate("Hello", GenerationOptions(max_new_tokens=3, ignore_eos=True))[0]
    assert result.exit_code == 130
    assert result.stdout == f"Hello{expected.text}\n"
    assert result.stderr.strip() == "Interrupted."


def test_many_threads_get_exactly_the_sequential_results(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    prompts = ["Hello", "The quick brown fox", "Once upon a time", "In a shocking finding"]
    jobs = [(prompts[i % 4], seed) for i, seed in enumerate(range(160))]

    def work(job: tuple[str, int]) -> list[int]:
        options = GenerationOptions(max_new_tokens=8, do_sample=True, temperature=1.3, top_k=50, seed=job[1])
        return model.generate(job[0], options)[0].token_ids

    sequential = [work(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(work, jobs))
    assert threaded == sequential
    assert len({tuple(t) for t in sequential}) > 100, "the seeds really differ"


def test_memory_is_stable_over_many_generations(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    process = psutil.Process()
    options = GenerationOptions(max_new_tokens=16, ignore_eos=True)

    def burst(count: int) -> None:
        for i in range(count):
            model.generate(["Hello", "The quick brown fox jumps"][i % 2 :], options)

    burst(50)  # warm-up: allocator arenas, caches
    settled = process.memory_info().rss
    burst(200)
    grown = process.memory_info().rss - settled
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 200 generations"


def test_runtime_is_safe_across_threads_while_streaming(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    options = GenerationOptions(max_new_tokens=12, ignore_eos=True)
    expected = model.generate("Hello", options)[0].text
    seen: list[str] = []
    lock = threading.Lock()

    def stream() -> None:
        text = "".join(model.stream("Hello", options))
        with lock:
            seen.append(text)

    threads = [threading.Thread(target=stream) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [expected] * 6


@pytest.mark.parametrize("name", ["../decode.onnx", "/etc/passwd", "sub/decode.onnx", ".."])
def test_manifest_paths_must_stay_in_the_folder(copy_export: Callable[[], Path], name: str) -> None:
    folder = copy_export()
    edit_manifest(folder, lambda m: m["graphs"]["decode"].__setitem__("file", name))  # type: ignore[index]
    with pytest.raises(ManifestError, match=r"plain file name|not a file name"):
        LoadedExport.load(folder)


def test_external_data_pointing_outside_the_folder_is_refused(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    tensor = next(t for t in graph.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = "../model.onnx.data"
    save_graph(folder, "decode", graph)
    with pytest.raises(ManifestError, match=r"points at external data '\.\./model\.onnx\.data'"):
        LoadedExport.load(folder)


def test_malformed_and_newer_manifests(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        LoadedExport.load(folder)
    (folder / "manifest.json").write_text(json.dumps({"format": "gpt2-onnx", "schema_version": 99}))
    with pytest.raises(ManifestError, match="schema version 99, newer"):
        LoadedExport.load(folder)
    (folder / "manifest.json").write_text(json.dumps({"format": "gpt2-onnx", "schema_version": 1, "model": {}}))
    with pytest.raises(ManifestError, match="malformed"):
        LoadedExport.load(folder)


def test_missing_weights_file(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    (folder / "model.onnx.data").unlink()
    with pytest.raises(ManifestError, match=r"lacks model\.onnx\.data"):
        LoadedExport.load(folder)


@pytest.fixture(scope="module")
def api(tiny_export: Path) -> Gpt2Onnx:
    return Gpt2Onnx.load(tiny_export)


def ids(*rows: list[int]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def test_api_rejects_bad_prefill_inputs(api: Gpt2Onnx) -> None:
    good = ids([1, 2, 3])
    positions = ids([0, 1, 2])
    with pytest.raises(InvalidInputError, match=r"input_ids holds token id 50257, outside \[0, 50257\)"):
        api.prefill(ids([1, 50257, 3]), np.ones_like(good), positions)
    with pytest.raises(InvalidInputError, match=r"attention_mask shape \(1, 2\) does not match"):
        api.prefill(good, ids([1, 1]), positions)
    with pytest.raises(InvalidInputError, match="position_ids shape"):
        api.prefill(good, np.ones_like(good), ids([0, 1, 2], [0, 1, 2]))
    with pytest.raises(InvalidInputError, match="input_ids must be int64"):
        api.prefill(good.astype(np.int32), np.ones_like(good), positions)
    feeds = {"input_ids": good, "attention_mask": np.ones_like(good), "position_ids": positions}
    with pytest.raises(InvalidInputError, match="prefill takes no past_key_values"):
        validate_feeds("prefill", {**feeds, "past_key_values.0.key": np.zeros((1, 4, 0, 16), np.float32)}, api.dims)


def test_api_rejects_bad_past(api: Gpt2Onnx) -> None:
    new, mask, position = ids([5]), ids([1, 1, 1]), ids([2])
    kv = np.zeros((1, 4, 2, 16), dtype=np.float32)
    past = {f"past_key_values.{i}.{k}": kv for i in range(2) for k in ("key", "value")}
    assert api.decode_step(new, mask, position, past)["logits"].shape == (1, 1, 50257)
    with pytest.raises(InvalidInputError, match="must hold 2 layers"):
        api.decode_step(new, mask, position, {k: v for k, v in past.items() if ".1." not in k})
    with pytest.raises(InvalidInputError, match="must be float32, got float16"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": kv.astype(np.float16)})
    with pytest.raises(InvalidInputError, match=r"past_key_values.1.value has shape \(1, 4, 2, 8\)"):
        api.decode_step(new, mask, position, {**past, "past_key_values.1.value": np.zeros((1, 4, 2, 8), np.float32)})
    with pytest.raises(InvalidInputError, match=r"has shape \(2, 4, 2, 16\)"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": np.zeros((2, 4, 2, 16), np.float32)})
    with pytest.raises(InvalidInputError, match="disagree on the past length"):
        api.decode_step(new, mask, position, {**past, "past_key_values.0.key": np.zeros((1, 4, 3, 16), np.float32)})
    with pytest.raises(InvalidInputError, match=r"\(batch, past \+ new\) = \(1, 2 \+ 1\)"):
        api.decode_step(new, ids([1, 1]), position, past)


def test_library_code_reads_no_environment_variables() -> None:
    """Configuration is passed explicitly; only the CLI touches the environment (to quiet libraries, and to find
    the user's cache folder)."""
    root = Path(__file__).resolve().parents[1]
    found = [
        path.relative_to(root).as_posix()
        for package in ("gpt2_onnx", "exporters", "runtimes")
        for path in (root / package).rglob("*.py")
        if "os.environ" in path.read_text() or "os.getenv" in path.read_text()
    ]
    assert found and all(path.startswith("gpt2_onnx/cli/") for path in found), found


def test_onnxruntime_run_failures_are_typed(tiny_export: Path) -> None:
    """Below the validated API, an ONNX Runtime failure is still one typed error naming the graph."""
    from gpt2_onnx.errors import InferenceError

    loaded = LoadedExport.load(tiny_export)
    ids32 = np.array([[1, 2]], dtype=np.int32)  # the graph takes int64
    with pytest.raises(InferenceError, match=r"ONNX Runtime failed running prefill\.onnx: "):
        loaded.run("prefill", {"input_ids": ids32, "attention_mask": ids32, "position_ids": ids32})


def test_output_folder_without_write_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The permission check itself (as root, ``os.access`` always says yes, so it is made to say no here)."""
    from gpt2_onnx import output_folder

    monkeypatch.setattr(output_folder.os, "access", lambda path, mode: False)
    result = invoke("export", "--model", "random:tiny", "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert one_error_line(result.output) == f"Error: cannot write into '{tmp_path}' (permission denied)"
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def forced_swap(
    earlier: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replace: Callable[[int, Path, Path], None]
) -> Path:
    """A copy of the export ``earlier`` at ``tmp_path/out``, then a forced commit of a new one over it (its
    manifest.json reads "new"), each ``os.replace`` of the swap going through ``replace(call_number, src, dst)``;
    returns the target."""
    import shutil

    from gpt2_onnx import output_folder

    target = tmp_path / "out"
    shutil.copytree(earlier, target)
    calls = iter(range(1, 10))
    monkeypatch.setattr(output_folder.os, "replace", lambda src, dst: replace(next(calls), src, dst))
    with output_folder.StagedFolder(target, force=True) as staged:
        (staged.path / "manifest.json").write_text("new")
        staged.commit()
    return target


def test_interrupt_during_a_forced_commit_keeps_a_whole_export(
    tiny_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT between the two renames that swap exports is held back until the new export is in place."""
    real_replace = os.replace
    done: list[int] = []

    def replace_then_interrupt(call: int, src: Path, dst: Path) -> None:
        real_replace(src, dst)
        done.append(call)
        if call == 1:  # the old export is moved aside, the new one not yet in place
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        forced_swap(tiny_export, tmp_path, monkeypatch, replace_then_interrupt)
    assert done == [1, 2]  # the swap finished before the interrupt was delivered
    assert (tmp_path / "out" / "manifest.json").read_text() == "new"
    assert leftovers(tmp_path) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler in force is back


def test_failed_swap_puts_the_earlier_export_back(
    tiny_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt2_onnx.errors import OutputPathError

    real_replace = os.replace

    def second_fails(call: int, src: Path, dst: Path) -> None:
        if call == 2:  # moving the new export into place
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    with pytest.raises(OutputPathError, match="No space left on device"):
        forced_swap(tiny_export, tmp_path, monkeypatch, second_fails)
    assert (tmp_path / "out" / "manifest.json").read_text() == (tiny_export / "manifest.json").read_text()
    assert leftovers(tmp_path) == []


def test_external_data_in_a_constant_node_is_refused(copy_export: Callable[[], Path]) -> None:
    """Not only initializers: a tensor in a node attribute pointing outside the folder never reaches ONNX Runtime."""
    folder = copy_export()
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    value = onnx.TensorProto(name="escape", data_type=onnx.TensorProto.FLOAT, dims=[1])
    value.data_location = onnx.TensorProto.EXTERNAL
    for key, text in (("location", "/etc/passwd"), ("offset", "0"), ("length", "4")):
        value.external_data.add(key=key, value=text)
    constant = onnx.helper.make_node("Constant", [], ["escape_out"], value=value)
    graph.graph.node.insert(0, constant)
    save_graph(folder, "decode", graph)
    with pytest.raises(ManifestError, match=r"tensor 'escape' points at external data '/etc/passwd'"):
        LoadedExport.load(folder)


def test_weights_file_linked_from_outside_is_refused(copy_export: Callable[[], Path], tmp_path: Path) -> None:
    folder = copy_export()
    elsewhere = tmp_path / "elsewhere.data"
    (folder / "model.onnx.data").rename(elsewhere)
    (folder / "model.onnx.data").symlink_to(elsewhere)
    with pytest.raises(ManifestError, match="outside the export folder"):
        LoadedExport.load(folder)


def test_quoted_library_messages_are_never_cut_mid_sentence() -> None:
    """ONNX Runtime puts the end of its sentence on the next line; the quote keeps it (and what follows)."""
    from gpt2_onnx.errors import first_line

    ort = RuntimeError(
        "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: past_key_values.1.key for "
        "the following indices\n index: 2 Got: 4 Expected: 2\n Please fix either the inputs/outputs or the model."
    )
    quoted = first_line(ort)
    assert "\n" not in quoted and quoted.endswith(
        "index: 2 Got: 4 Expected: 2 Please fix either the inputs/outputs or the model."
    )
    long = ValueError(" ".join(f"Sentence number {i} says something." for i in range(40)))
    cut = first_line(long)
    assert cut.endswith("says something. […]") and len(cut) <= 420  # cut between sentences only
    assert first_line(ValueError("")) == "ValueError"
