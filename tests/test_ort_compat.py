"""ONNX Runtime compatibility: the manifest's minimum, the refusal of an older runtime, the matrix's logic.

The matrix itself (one venv per onnxruntime release) runs from scripts/ort-matrix.sh. The last test here runs
the tiny export on the matrix's venvs when ``GPT2_ONNX_ORT_VENVS`` names their folder (the matrix's default is
``.ci-cache/ort-matrix/venvs``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from gpt2_onnx.app.import_roots import import_roots
from gpt2_onnx_core.compatibility import (
    IN_PLACE_KV_MIN_ONNXRUNTIME,
    MERGED_LAYOUT_MIN_ONNXRUNTIME,
    OPTIMIZE_MIN_ONNXRUNTIME,
    min_onnxruntime_for,
)
from gpt2_onnx_core.config import SUPPORTED_OPSETS
from gpt2_onnx_core.errors import RuntimeVersionError
from gpt2_onnx_core.precisions import FP32, PRECISIONS, precision_flag
from gpt2_onnx_core.versions import version_tuple
from scripts import ort_matrix as matrix
from tests.helpers import edit_manifest, invoke

REPO = Path(__file__).resolve().parent.parent
FUTURE = "99.0.0"


def _require_future_runtime(folder: Path) -> None:
    edit_manifest(folder, lambda m: m.__setitem__("min_onnxruntime", FUTURE))


def test_manifest_records_the_opset_minimum_and_lowest_ir(tiny_export: Path) -> None:
    data = json.loads((tiny_export / "manifest.json").read_text(encoding="utf-8"))
    assert data["opset"] == 17
    assert data["min_onnxruntime"] == min_onnxruntime_for(17, False, FP32)
    for name in ("prefill.onnx", "decode.onnx"):
        graph = onnx.load(str(tiny_export / name), load_external_data=False)
        # opset 17's own IR version: torch.onnx writes 10, which onnxruntime < 1.18 refuses
        assert graph.ir_version == data["ir_version"] == 8


def test_load_refuses_a_runtime_older_than_the_manifest_minimum(copy_export: Callable[[], Path]) -> None:
    import onnxruntime as ort

    from gpt2_onnx_runtimes.session import LoadedExport

    folder = copy_export()
    _require_future_runtime(folder)
    with pytest.raises(RuntimeVersionError) as caught:
        LoadedExport.load(folder)
    message = str(caught.value)
    assert "\n" not in message
    assert FUTURE in message and ort.__version__ in message


def test_run_command_refuses_with_one_line_naming_both_versions(copy_export: Callable[[], Path]) -> None:
    import onnxruntime as ort

    folder = copy_export()
    _require_future_runtime(folder)
    result = invoke("run", str(folder), "-p", "Hello", "-n", "2")
    assert result.exit_code == RuntimeVersionError.exit_code
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error:") and FUTURE in lines[0] and ort.__version__ in lines[0]


def test_matrix_check_passes_here_and_reports_a_refusal(tiny_export: Path, copy_export: Callable[[], Path]) -> None:
    from gpt2_onnx_runtimes.matrix_check import check_cell

    assert check_cell(tiny_export).status == "pass"
    folder = copy_export()
    _require_future_runtime(folder)
    refused = check_cell(folder)
    assert refused.status == "refused" and FUTURE in refused.detail


def test_matrix_check_runs_without_torch(tiny_export: Path) -> None:
    """The check a runtime venv runs imports neither torch nor transformers (it exits 3 if it did)."""
    command = [sys.executable, "-m", "gpt2_onnx_runtimes.matrix_check", str(tiny_export)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(import_roots())}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "pass"


def test_matrix_tables_are_consistent() -> None:
    versions = [env.version for env in matrix.RUNTIMES]
    assert versions == sorted(versions, key=version_tuple), "RUNTIMES runs oldest first"
    assert set(matrix.REQUIRED) <= set(versions)
    assert len({variant.name for variant in matrix.VARIANTS}) == len(matrix.VARIANTS)
    flags = [variant.flags for variant in matrix.VARIANTS]
    opsets = {int(flag[flag.index("--opset") + 1]) for flag in flags if "--opset" in flag}
    assert opsets == set(SUPPORTED_OPSETS), "every supported opset is measured"
    for opset in SUPPORTED_OPSETS:  # every recorded minimum is a release the matrix runs, so CI confirms it
        assert min_onnxruntime_for(opset, False, FP32) in versions
    minima = {
        "optimize": OPTIMIZE_MIN_ONNXRUNTIME,
        "merged layout": MERGED_LAYOUT_MIN_ONNXRUNTIME,
        "in-place KV cache": IN_PLACE_KV_MIN_ONNXRUNTIME,
    }
    minima |= {precision.flag: precision.min_onnxruntime for precision in PRECISIONS}
    for feature, minimum in minima.items():  # the same for the variants' own minima
        assert minimum in versions, f"{feature}'s minimum {minimum} is no row of RUNTIMES"
    measured = set()
    for variant in matrix.VARIANTS:  # what each matrix variant's manifest will record, too
        opset = int(_flag(variant.flags, "--opset", "17"))
        optimize = "--optimize" in variant.flags
        precision = precision_flag(_flag(variant.flags, "--precision", "fp32"))
        assert min_onnxruntime_for(opset, optimize, precision) in versions, variant.name
        measured |= {precision.flag, "optimize"} if optimize else {precision.flag}
    assert {p.flag for p in PRECISIONS} | {"optimize"} <= measured, "every variant minimum is measured by a variant"


def _flag(flags: tuple[str, ...], name: str, default: str) -> str:
    return flags[flags.index(name) + 1] if name in flags else default


def _cell(version: str, status: str) -> object:
    return matrix.Cell("v", version, matrix.AS_EXPORTED, status, "pass", "", 0.0)


def test_measured_minimum_is_the_oldest_release_from_which_all_newer_pass() -> None:
    cells = [
        _cell("1.16.3", "pass"),
        _cell("1.17.0", "load-error"),
        _cell("1.18.0", "pass"),
        _cell("1.20.1", "pass"),
    ]
    assert matrix.measured_minimum(cells) == "1.18.0"
    assert matrix.measured_minimum([*cells, _cell("1.32.0", "mismatch")]) is None
    assert matrix.measured_minimum([_cell("1.16.3", "pass"), _cell("1.15.1", "pass")]) == "1.15.1"
    assert matrix.measured_minimum([_cell("1.17.0", "refused"), _cell("1.17.0", "pass")]) == "1.17.0"


def test_a_release_below_the_minimum_must_refuse_and_really_fail() -> None:
    assert matrix.planned_cells("1.18.0", "1.18.0") == [(matrix.AS_EXPORTED, "pass")]
    assert matrix.planned_cells("1.17.3", "1.18.0") == [
        (matrix.AS_EXPORTED, "refused"),
        (matrix.LIFTED, "fails"),
    ]
    fails = matrix.Cell("v", "1.17.3", matrix.LIFTED, "load-error", "fails", "", 0.0)
    assert fails.ok
    assert not matrix.Cell("v", "1.17.3", matrix.LIFTED, "pass", "fails", "", 0.0).ok  # the minimum is too high
    assert not matrix.Cell("v", "1.17.3", matrix.LIFTED, "crash", "fails", "", 0.0).ok  # a broken harness


def test_ci_runs_the_required_releases_the_minimum_and_the_one_below() -> None:
    chosen = matrix.releases_to_run("1.18.0", everything=False)
    assert set(matrix.REQUIRED) <= set(chosen) and {"1.17.3", "1.18.0"} <= set(chosen)
    assert chosen == sorted(chosen, key=version_tuple)
    assert matrix.releases_to_run("1.15.0", everything=False)[0] == "1.15.0"  # nothing older to run
    assert len(matrix.releases_to_run("1.15.0", everything=True)) == len(matrix.RUNTIMES)


_VENVS = os.environ.get(matrix.VENVS_ENV)


@pytest.mark.skipif(not _VENVS, reason=f"{matrix.VENVS_ENV} names no venv folder (scripts/ort-matrix.sh builds them)")
@pytest.mark.parametrize("version", matrix.REQUIRED)
def test_required_release_reproduces_the_golden_tokens(version: str, tiny_export: Path) -> None:
    python = matrix.venv_python(matrix.venv_folder(Path(str(_VENVS)), version))
    if not python.exists():
        pytest.skip(f"no venv for onnxruntime {version} in {_VENVS}")
    cell = matrix.run_cell(python, tiny_export, "tiny", version, matrix.AS_EXPORTED, "pass")
    assert cell.ok, cell.line()
