"""Every file of an export is checked against its manifest's sha256 before the first token; files found intact
are remembered outside the export (the user cache), so repeated loads stay cheap; ``--no-sha256-check`` opts out."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from gpt2_onnx.cli.integrity import cache_dir
from gpt2_onnx_core import integrity
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.integrity import CACHE_FILE_NAME, IntegrityCheck
from gpt2_onnx_runtimes import Gpt2Onnx, RuntimeOptions
from tests.helpers import invoke, one_error_line


def run(folder: Path, *args: str) -> Result:
    return invoke("run", str(folder), "-p", "Hello", "-n", "2", *args)


def flip_byte(path: Path, offset: int | None = None, keep_mtime: bool = False) -> None:
    """Change one byte in place; the size stays (and, with ``keep_mtime``, the modification time too)."""
    before = path.stat()
    where = path.stat().st_size // 2 if offset is None else offset
    with path.open("r+b") as handle:
        handle.seek(where)
        byte = handle.read(1)
        handle.seek(where)
        handle.write(bytes([byte[0] ^ 0x01]))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


def count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = integrity.sha256_file

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(integrity, "sha256_file", counting)
    return hashed


@pytest.mark.parametrize("name", ["model.onnx.data", "decode.onnx", "tokenizer.json", "golden.json"])
def test_a_changed_byte_is_refused_before_the_first_token(copy_export: Callable[[], Path], name: str) -> None:
    folder = copy_export()
    flip_byte(folder / name)
    result = run(folder)
    assert result.exit_code == 2, result.output
    error = one_error_line(result.output)
    assert f"{name} changed since the export (sha256 differs from manifest.json)" in error, error
    assert result.stdout == ""  # not a token


def test_the_python_api_checks_by_default(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    flip_byte(folder / "model.onnx.data")
    with pytest.raises(ManifestError, match=r"model\.onnx\.data changed since the export"):
        Gpt2Onnx.load(folder)


def test_no_sha256_check_checks_sizes_only(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    flip_byte(folder / "golden.json", offset=0)  # '{' becomes 'z': a change only a hash sees
    assert run(folder, "--no-sha256-check").exit_code == 0
    with (folder / "golden.json").open("ab") as handle:
        handle.write(b" ")
    result = run(folder, "--no-sha256-check")
    assert result.exit_code == 2 and "golden.json has" in one_error_line(result.output)


def test_files_found_intact_are_not_hashed_again(
    copy_export: Callable[[], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_export()
    cache = tmp_path / "cache" / CACHE_FILE_NAME
    options = RuntimeOptions(integrity=IntegrityCheck(cache_file=cache))
    hashed = count_hashes(monkeypatch)
    Gpt2Onnx.load(folder, options=options)
    files = len(json.loads((folder / "manifest.json").read_text())["files"])
    assert len(hashed) == files and cache.is_file()
    Gpt2Onnx.load(folder, options=options)
    assert len(hashed) == files  # none hashed the second time


def test_a_change_after_the_check_is_seen_even_with_the_old_modification_time(
    copy_export: Callable[[], Path], tmp_path: Path
) -> None:
    """The fingerprint holds the status-change time, which no user can set back."""
    folder = copy_export()
    options = RuntimeOptions(integrity=IntegrityCheck(cache_file=tmp_path / CACHE_FILE_NAME))
    Gpt2Onnx.load(folder, options=options)
    flip_byte(folder / "model.onnx.data", keep_mtime=True)
    with pytest.raises(ManifestError, match=r"model\.onnx\.data changed"):
        Gpt2Onnx.load(folder, options=options)


def test_a_copied_export_is_hashed_again(
    copy_export: Callable[[], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    folder = copy_export()
    options = RuntimeOptions(integrity=IntegrityCheck(cache_file=tmp_path / CACHE_FILE_NAME))
    Gpt2Onnx.load(folder, options=options)
    hashed = count_hashes(monkeypatch)
    copied = shutil.copytree(folder, tmp_path / "elsewhere")
    Gpt2Onnx.load(copied, options=options)
    assert hashed and all(path.is_relative_to(copied.resolve()) for path in hashed)


@pytest.mark.parametrize("damage", ["garbage", "wrong shape", "a folder", "unwritable"])
def test_a_broken_cache_never_breaks_loading(
    copy_export: Callable[[], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    folder = copy_export()
    cache = tmp_path / "cache" / CACHE_FILE_NAME
    cache.parent.mkdir()
    if damage == "garbage":
        cache.write_bytes(b"\xff\x00not json")
    elif damage == "wrong shape":
        cache.write_text(json.dumps({"version": 1, "files": [1, 2]}))
    elif damage == "a folder":
        cache.mkdir()
    else:  # the cache's folder is a file: nothing can be written there
        cache.parent.rmdir()
        cache.parent.write_text("not a folder")
    options = RuntimeOptions(integrity=IntegrityCheck(cache_file=cache))
    hashed = count_hashes(monkeypatch)
    assert Gpt2Onnx.load(folder, options=options).generate("Hi")[0].token_ids
    assert hashed  # it fell back to hashing
    flip_byte(folder / "model.onnx.data")
    with pytest.raises(ManifestError, match="changed since the export"):
        Gpt2Onnx.load(folder, options=options)
    if damage == "garbage":  # rewritten whole
        assert json.loads(cache.read_text())["version"] == 1


def test_the_command_line_remembers_in_the_xdg_cache(
    copy_export: Callable[[], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_export()
    monkeypatch.delenv("GPT2_ONNX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert run(folder).exit_code == 0
    remembered = json.loads((tmp_path / "xdg" / "gpt2-onnx" / CACHE_FILE_NAME).read_text())["files"]
    assert str((folder / "model.onnx.data").resolve()) in remembered
    assert not any(path.name.endswith(".json") and "verified" in path.name for path in folder.iterdir())


def test_where_the_cache_lives() -> None:
    home = Path.home()
    assert cache_dir({"GPT2_ONNX_CACHE_DIR": "/srv/cache", "XDG_CACHE_HOME": "/x"}) == Path("/srv/cache")
    assert cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/gpt2-onnx")
    assert cache_dir({"XDG_CACHE_HOME": "relative"}) == home / ".cache" / "gpt2-onnx"  # ignored, as XDG says
    assert cache_dir({}) == home / ".cache" / "gpt2-onnx"
