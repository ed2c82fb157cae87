"""No option is silently ignored, on any command: an option that would have no effect is refused (exit 2) with a
line naming it; errors name the command line's flags, not Python parameters; ``--verbose`` works on either side
of the command."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result

import gpt2_onnx_runtimes.api
from gpt2_onnx_core.errors import InvalidInputError
from tests.helpers import edit_manifest, invoke, one_error_line

SHORT = ("--new-tokens", "3", "--prompt-lengths", "2", "--decode-prompt-length", "4", "--batch-prompt-length", "3")


def assert_refused(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    error = one_error_line(result.output)
    for fragment in fragments:
        assert fragment in error, error


def test_export_seed_with_a_checkpoint_is_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("export", "--model", str(tiny_checkpoint), "--weights-seed", "3", "-o", str(out))
    assert_refused(result, "--weights-seed seeds random:NAME weights only", "brings its own weights")
    assert not out.exists()


@pytest.mark.parametrize("model", ["random:tiny", "local"])
def test_export_revision_without_a_hub_id_is_refused(tiny_checkpoint: Path, tmp_path: Path, model: str) -> None:
    spec = str(tiny_checkpoint) if model == "local" else model
    result = invoke("export", "--model", spec, "--revision", "v1", "-o", str(tmp_path / "out"))
    why = "is a local folder" if model == "local" else "is built here from a seed"
    assert_refused(result, "--revision selects a Hugging Face Hub revision", why)


def test_export_options_refused_before_any_work(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    assert_refused(invoke("export", "--model", "random:tiny", "--block-size", "64", "-o", out), "--block-size applies")
    assert_refused(
        invoke("export", "--model", "random:tiny", "--simplify", "--precision", "int4", "-o", out),
        "--simplify runs on plain fp32 graphs only",
        "--precision",
    )


def test_the_python_api_refuses_the_same(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from gpt2_onnx_core.config import ExportOptions

    with pytest.raises(InvalidInputError, match=r"^seed seeds random:NAME weights only"):
        ExportOptions(model=str(tiny_checkpoint), output=tmp_path / "x", seed=0)
    assert ExportOptions(model="random:tiny", seed=3).seed == 3


@pytest.mark.parametrize("option", [["--model", "random:tiny"], ["--weights-seed", "3"], ["--attention", "eager"]])
def test_bench_baseline_options_with_no_eager_are_refused(tiny_export: Path, option: list[str]) -> None:
    result = invoke("bench", str(tiny_export), "--no-eager", *option)
    assert_refused(result, f"{option[0]} applies to the PyTorch eager baseline, and --no-eager drops it")


def test_bench_model_seed_with_a_checkpoint_baseline_is_refused(tiny_export: Path) -> None:
    """tiny_export's source is a checkpoint folder: a seed would not change its weights."""
    result = invoke("bench", str(tiny_export), *SHORT, "--weights-seed", "3")
    assert_refused(result, "--weights-seed seeds a random:NAME baseline only")


def test_bench_unshared_without_an_fp32_folder_or_off_the_cpu_is_refused(
    tiny_export: Path, copy_export: Callable[[], Path]
) -> None:
    result = invoke("bench", str(tiny_export), *SHORT, "--no-eager", "--unshared", "--provider", "cuda")
    assert_refused(result, "--unshared applies on the CPU only")
    quantized = copy_export()
    edit_manifest(quantized, lambda manifest: manifest.__setitem__("precision", "int4"))
    result = invoke("bench", str(quantized), *SHORT, "--no-eager", "--unshared")
    assert_refused(result, "--unshared measures fp32 folders again, and none is fp32")


def test_bench_errors_name_its_flags(tiny_export: Path) -> None:
    assert_refused(invoke("bench", str(tiny_export), "--prompt-lengths", "0,4"), "--prompt-lengths must be >= 1")
    assert_refused(invoke("bench", str(tiny_export), "--prompt-lengths", "a"), "--prompt-lengths takes")
    bad = invoke("bench", str(tiny_export), "--decode-contexts", "512,x")
    assert_refused(bad, "--decode-contexts takes comma-separated integers, got '512,x'")
    assert_refused(invoke("bench", str(tiny_export), "--decode-contexts", "0,8"), "--decode-contexts must be >= 1")
    too_long = invoke("bench", str(tiny_export), *SHORT, "--no-eager", "--decode-contexts", "120")  # 128 positions
    assert_refused(too_long, "needs 136 positions")
    alone = invoke("bench", str(tiny_export), "--context-new-tokens", "8")
    assert_refused(alone, "--context-new-tokens applies only with --decode-contexts")


@pytest.fixture
def root_level() -> Iterator[None]:
    """Puts the root logger's level back after a test that changes it."""
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_works_on_either_side_of_the_command(tiny_export: Path, where: str, root_level: None) -> None:
    """Once: "No such option '--verbose'. Did you mean '--opset'?" after the command."""
    args = ["run", str(tiny_export), "-p", "Hi", "-n", "2"]
    result = invoke(*(["--verbose", *args] if where == "before" else [*args, "--verbose"]))
    assert result.exit_code == 0, result.output
    assert logging.getLogger().level == logging.INFO
    assert logging.getLogger("onnxruntime").level == logging.NOTSET  # the libraries are no longer quieted


def test_verbose_after_the_command_shows_an_internal_error_traceback(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch, root_level: None
) -> None:

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(gpt2_onnx_runtimes.api.Gpt2Onnx, "open", broken)
    quiet = invoke("run", str(tiny_export), "-p", "Hi")
    assert quiet.exit_code == 70 and "Internal error: ValueError: a bug" in quiet.output
    loud = invoke("run", str(tiny_export), "-p", "Hi", "-v", catch_exceptions=True)
    assert isinstance(loud.exception, ValueError)  # re-raised for the traceback
