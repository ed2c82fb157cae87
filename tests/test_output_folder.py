"""An export's output folder is written whole or not at all: a failing or full disk, an unwritable location or a
failing check leaves nothing behind (and keeps an earlier export that --force would replace), and the swap of a
forced commit finishes or puts the earlier export back."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import invoke, leftovers, one_error_line

EXPORT = [sys.executable, "-m", "gpt2_onnx", "export"]


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


@pytest.mark.usefixtures("shared_tracing")
def test_forced_export_that_fails_keeps_the_old_export(
    tiny_export: Path, tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import gpt2_onnx.app.export as export_module
    from gpt2_onnx_core.errors import ExportCheckError

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
    assert result.exit_code == 2  # refused before the model loads: the error is the only line
    assert result.output.startswith("Error: cannot create a folder in '/proc'") and result.output.count("\n") == 1


def test_output_folder_without_write_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The permission check itself (as root, ``os.access`` always says yes, so it is made to say no here)."""
    from gpt2_onnx.app import output_folder

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

    from gpt2_onnx.app import output_folder

    target = tmp_path / "out"
    shutil.copytree(earlier, target)
    calls = iter(range(1, 10))
    monkeypatch.setattr(output_folder.os, "replace", lambda src, dst: replace(next(calls), src, dst))
    with output_folder.StagedFolder(target, force=True) as staged:
        (staged.path / "manifest.json").write_text("new")
        staged.commit()
    return target


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler in force, whatever this process inherited: a process started in the background
    by a shell without job control begins with SIGINT ignored, and Python then installs no handler of its own."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
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
    from gpt2_onnx_core.errors import OutputPathError

    real_replace = os.replace

    def second_fails(call: int, src: Path, dst: Path) -> None:
        if call == 2:  # moving the new export into place
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    with pytest.raises(OutputPathError, match="No space left on device"):
        forced_swap(tiny_export, tmp_path, monkeypatch, second_fails)
    assert (tmp_path / "out" / "manifest.json").read_text() == (tiny_export / "manifest.json").read_text()
    assert leftovers(tmp_path) == []
