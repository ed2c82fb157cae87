"""One cell of the ONNX Runtime matrix: load an export with the installed runtime and check its golden tokens.

Runs in a virtual environment that holds onnxruntime, numpy and onnx and nothing of the PyTorch side::

    python -m runtimes.matrix_check EXPORT_FOLDER

It prints one JSON line (:class:`CellResult`) and exits 0 whatever the verdict: the caller knows what to
expect of this runtime (a pass, or a refusal when the export needs a newer one) and judges. A non-zero exit
means the check itself could not run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from gpt2_onnx.errors import Gpt2OnnxError, InferenceError, RuntimeVersionError
from gpt2_onnx.versions import installed_versions

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


def check_cell(folder: Path) -> CellResult:
    """Load ``folder`` on the CPU provider with default session options; compare it with its golden.json."""
    import onnxruntime as ort

    from runtimes.golden_check import check_golden
    from runtimes.session import LoadedExport

    def result(status: CellStatus, detail: str) -> CellResult:
        return CellResult(ort.__version__, installed_versions(("numpy",)).get("numpy", "absent"), status, detail)

    try:
        loaded = LoadedExport.load(folder)
    except RuntimeVersionError as exc:
        return result("refused", str(exc))
    except Gpt2OnnxError as exc:
        return result("load-error", str(exc))
    try:
        report = check_golden(loaded)
    except InferenceError as exc:
        return result("run-error", str(exc))
    return result("pass" if report.ok else "mismatch", report.summary())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m runtimes.matrix_check EXPORT_FOLDER", file=sys.stderr)
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
