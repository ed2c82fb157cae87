"""The measured-matrix table of docs/compatibility.md, from ``scripts/ort_matrix.py --all --json FILE``.

    python scripts/matrix_table.py matrix.json      # prints the Markdown table and the counts under it

Each cell is the verdict a release gave the variant as exported, or, below the variant's minimum, on the copy whose
minimum was lifted (what the release really does with it); a pass also says whether the merged layout ran.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gpt2_onnx_core.versions import version_tuple  # noqa: E402  (needs REPO on sys.path first)

__all__ = ["table"]


def _verdict(cells: list[dict[str, Any]]) -> str:
    """One release's verdict on one variant: the lifted copy's where the release is below the minimum."""
    lifted = [cell for cell in cells if cell["manifest"] != "as exported"]
    cell = lifted[0] if lifted else cells[0]
    if cell["status"] == "pass" and "merged layout refused" in cell["detail"]:
        return "pass (split)"
    return str(cell["status"])


def table(cells: list[dict[str, Any]]) -> str:
    variants = list(dict.fromkeys(cell["variant"] for cell in cells))
    releases = sorted({cell["onnxruntime"] for cell in cells}, key=version_tuple)
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        by_key.setdefault((cell["variant"], cell["onnxruntime"]), []).append(cell)
    lines = ["| onnxruntime | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for release in releases:
        row = [_verdict(by_key[(variant, release)]) if (variant, release) in by_key else "—" for variant in variants]
        lines.append(f"| {release} | " + " | ".join(row) + " |")
    statuses = Counter(cell["status"] for cell in cells)
    failed = sum(cell["status"] != cell["expected"] and cell["expected"] != "fails" for cell in cells)
    counts = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    lines += [
        "",
        f"{len(cells)} checks on {len(releases)} releases and {len(variants)} variants ({counts}); "
        f"{failed} against expectation.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/matrix_table.py MATRIX.json", file=sys.stderr)
        return 2
    print(table(json.loads(Path(argv[0]).read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
