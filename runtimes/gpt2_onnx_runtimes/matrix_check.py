"""One cell of the ONNX Runtime matrix: load an export with the installed runtime and check its golden tokens, in
the split layout (the folder's two graphs) and the merged one (the generation graph, from its minimum).

Runs in a virtual environment that holds onnxruntime, numpy and onnx and nothing of the PyTorch side::

    python -m gpt2_onnx_runtimes.matrix_check EXPORT_FOLDER

It prints one JSON line (:class:`CellResult`) and exits 0 whatever the verdict: the caller knows what to
expect of this runtime (a pass, or a refusal when the export needs a newer one) and judges. A non-zero exit
means the check itself could not run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gpt2_onnx_core import compatibility
from gpt2_onnx_core.errors import Gpt2OnnxError, InferenceError, RuntimeVersionError
from gpt2_onnx_core.versions import installed_versions, version_tuple

if TYPE_CHECKING:
    from gpt2_onnx_runtimes.runtime_options import SessionLayout

__all__ = ["CellResult", "CellStatus", "check_cell", "main"]

CellStatus = Literal["pass", "mismatch", "refused", "load-error", "run-error"]
FORBIDDEN_MODULES = ("torch", "transformers")  # the runtime side must run where these are not installed


@dataclass(frozen=True)
class CellResult:
    """What one runtime made of one export."""

    onnxruntime: str
    numpy: str
    # pass: golden tokens reproduced; refused: our own version check; load-error: ONNX Runtime failed to load;
    # run-error: it loaded the graphs but failed running them
    status: CellStatus
    detail: str  # the one-line reason, or the parity summary

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _golden_status(folder: Path, layout: SessionLayout) -> tuple[CellStatus, str]:
    """Load ``folder`` in ``layout`` on the CPU provider with default session options; check its golden.json."""
    from gpt2_onnx_runtimes.golden_check import check_golden
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    try:
        loaded = LoadedExport.load(folder, RuntimeOptions(layout=layout))
    except RuntimeVersionError as exc:
        return "refused", str(exc)
    except Gpt2OnnxError as exc:
        return "load-error", str(exc)
    try:
        report = check_golden(loaded)
    except InferenceError as exc:
        return "run-error", str(exc)
    return ("pass" if report.ok else "mismatch"), report.summary()


def _merged_layout(folder: Path) -> tuple[bool, str]:
    """Whether the merged layout behaves as its recorded minimum (gpt2_onnx_core.compatibility) says on this release:
    it reproduces the golden tokens from that release on; below it, it is refused by our version check and, with
    that check lifted, really fails to load or computes other tokens."""
    import onnxruntime as ort

    minimum = compatibility.MERGED_LAYOUT_MIN_ONNXRUNTIME
    if version_tuple(ort.__version__) >= version_tuple(minimum):
        status, detail = _golden_status(folder, "merged")
        return status == "pass", f"merged layout {status}"
    status, detail = _golden_status(folder, "merged")
    if status != "refused":
        return (
            False,
            f"merged layout below {compatibility.MERGED_LAYOUT_MIN_ONNXRUNTIME} was not refused: {status}: {detail}",
        )
    compatibility.MERGED_LAYOUT_MIN_ONNXRUNTIME = "0"  # this process only: what the release really does with it
    lifted, detail = _golden_status(folder, "merged")
    if lifted == "pass":
        return False, "merged layout passes below its recorded minimum; lower MERGED_LAYOUT_MIN_ONNXRUNTIME"
    return True, f"merged layout refused; lifted: {lifted}"


def check_cell(folder: Path) -> CellResult:
    """The split layout (the folder's two graphs) against golden.json; where that passes, the merged layout's
    behaviour on this release too (:func:`_merged_layout`)."""
    import onnxruntime as ort

    def result(status: CellStatus, detail: str) -> CellResult:
        return CellResult(ort.__version__, installed_versions(("numpy",)).get("numpy", "absent"), status, detail)

    status, detail = _golden_status(folder, "split")
    if status != "pass":
        return result(status, detail)
    merged_ok, merged = _merged_layout(folder)
    return result("pass" if merged_ok else "mismatch", f"{detail}; {merged}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpt2_onnx_runtimes.matrix_check EXPORT_FOLDER", file=sys.stderr)
        return 2
    cell = check_cell(Path(args[0]))
    leaked = [name for name in FORBIDDEN_MODULES if name in sys.modules]
    if leaked:
        print(f"the runtime check imported {', '.join(leaked)}", file=sys.stderr)
        return 3
    print(cell.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
