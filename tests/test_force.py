"""``export --force`` replaces only an earlier export, and only its own files; everything else is refused with
one line (exit 2) and left exactly as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import Result

from tests.helpers import invoke, leftovers, one_error_line


def export(*args: str) -> Result:
    return invoke("export", "--model", "random:tiny", *args)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its text, and every folder (as '<dir>')."""
    return {
        p.relative_to(folder).as_posix(): "<dir>" if p.is_dir() else p.read_text(errors="replace")
        for p in sorted(folder.rglob("*"))
    }


def assert_refused(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    error = one_error_line(result.output)
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in error, error


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """A folder of someone's work: a file and a subfolder with a file."""
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / "precious.txt").write_text("years of work")
    (folder / "sub" / "more.txt").write_text("more work")
    return folder


@pytest.mark.parametrize("force", [True, False])
def test_the_current_directory_is_never_replaced(
    user_folder: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    before = snapshot(user_folder)
    monkeypatch.chdir(user_folder)
    result = export("-o", ".", *(["--force"] if force else []))
    assert_refused(result, "is the current directory", "never written over")
    assert snapshot(user_folder) == before
    assert Path.cwd() == user_folder and leftovers(user_folder.parent) == []


def test_an_empty_current_directory_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert_refused(export("-o", "."), "is the current directory")
    assert list(empty.iterdir()) == [] and leftovers(tmp_path) == []


def test_folders_above_the_current_directory_are_never_replaced(
    user_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(user_folder / "sub")
    before = snapshot(user_folder)
    assert_refused(export("-o", "..", "--force"), "holds the current directory")
    assert_refused(export("-o", "/", "--force"), "is the root folder")
    assert snapshot(user_folder) == before


@pytest.mark.parametrize("spelling", ["home", "~"])
def test_the_home_folder_is_never_replaced(
    user_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.setenv("HOME", str(user_folder))
    monkeypatch.chdir(tmp_path)
    before = snapshot(user_folder)
    target = str(user_folder) if spelling == "home" else "~"  # '~' quoted past the shell means home too
    assert_refused(export("-o", target, "--force"), "is the home folder")
    assert snapshot(user_folder) == before and not (tmp_path / "~").exists()


def test_a_folder_without_an_export_is_refused_even_with_force(tmp_path: Path) -> None:
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "notes.txt").write_text("my notes")
    assert_refused(export("-o", str(docs), "--force"), "holds no gpt2-onnx export", "no manifest.json")
    assert snapshot(docs) == {"notes.txt": "my notes"} and leftovers(tmp_path) == []


def test_a_manifest_of_another_tool_is_not_an_export(tmp_path: Path) -> None:
    """Recognised by the manifest's format, not by the file name."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"format": "another-tool", "files": {}}))
    (other / "data.bin").write_bytes(b"\0" * 10)
    before = snapshot(other)
    assert_refused(export("-o", str(other), "--force"), "not a gpt2-onnx manifest")
    assert snapshot(other) == before


@pytest.mark.parametrize("extra", ["notes.txt", "sub/"])
def test_an_export_with_files_it_did_not_write_is_refused(tiny_export: Path, tmp_path: Path, extra: str) -> None:
    out = tmp_path / "out"
    shutil.copytree(tiny_export, out)
    if extra.endswith("/"):
        (out / extra).mkdir()
        (out / extra / "kept.txt").write_text("mine")
    else:
        (out / extra).write_text("mine")
    before = snapshot(out)
    assert_refused(export("-o", str(out), "--force"), "files it did not write", f"({extra})", "move the others out")
    assert snapshot(out) == before and leftovers(tmp_path) == []


def test_without_force_a_non_empty_folder_is_refused(tiny_export: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(tiny_export, out)
    before = snapshot(out)
    assert_refused(export("-o", str(out)), "not empty", "--force")
    assert snapshot(out) == before and leftovers(tmp_path) == []


@pytest.mark.usefixtures("shared_tracing")
def test_force_replaces_an_earlier_export_once_the_new_one_is_checked(tiny_export: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(tiny_export, out)
    old_id = json.loads((out / "manifest.json").read_text())["export"]["export_id"]
    result = export("-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["export"]["export_id"] != old_id and manifest["model"]["source"] == "random:tiny"
    assert {p.name for p in out.iterdir()} == {"manifest.json", *manifest["files"]}
    assert leftovers(tmp_path) == []
