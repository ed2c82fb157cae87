"""Conventions every module keeps: configuration is passed explicitly (only the command line reads the
environment), and a quoted library message stays one line, cut between sentences only."""

from __future__ import annotations

from pathlib import Path


def test_library_code_reads_no_environment_variables() -> None:
    """Configuration is passed explicitly; only the CLI touches the environment (to quiet libraries, to find the
    user's cache folder, and for serve, to keep an embedded Ray on loopback)."""
    root = Path(__file__).resolve().parents[1]
    found = [
        path.relative_to(root).as_posix()
        for package in ("gpt2_onnx", "core", "exporters", "runtimes")
        for path in (root / package).rglob("*.py")
        if "os.environ" in path.read_text() or "os.getenv" in path.read_text()
    ]
    assert found and all(path.startswith("gpt2_onnx/cli/") for path in found), found


def test_quoted_library_messages_are_never_cut_mid_sentence() -> None:
    """ONNX Runtime puts the end of its sentence on the next line; the quote keeps it (and what follows)."""
    from gpt2_onnx_core.errors import first_line

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
