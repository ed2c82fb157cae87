"""``gpt2-onnx verify`` over every precision and every runtime mode offered, on one checkpoint: the proof that each
combination a user can ask for passes (or is refused in one line where it is not offered).

    python scripts/verify_modes.py                        # checkpoints/pydocs-tiny on its heldout.txt
    python scripts/verify_modes.py --model CKPT --text TEXT --out DIR

Exports the checkpoint once per export configuration (fp32, fp16, int8, int8 ``--matmul-kernel dynamic``, int4,
int4 ``--block-size 128``), then runs ``gpt2-onnx verify --perplexity TEXT`` on each with each runtime mode: the
defaults, ``--kv-cache int8``, and for MatMulNBits exports ``--prompt-kernel dynamic`` alone and with the int8
cache. A mode the export does not offer must be refused with exit 2 and one line (fp16's cache is cast around its
attention, so it cannot be written in place: ``--kv-cache int8`` is refused). Each verify's JSON report is kept.

Writes benchmarks/results/<UTC stamp>-verify-modes.json (every verdict, the perplexities, the machine and the
versions) and a Markdown table beside it; ``python benchmarks/performance_doc.py`` puts it in docs/performance.md.
Exits 1 when any combination fails or is refused otherwise than expected.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_INSTALLED = Path(sys.executable).with_name("gpt2-onnx")  # the console script beside this interpreter
CLI = [str(_INSTALLED)] if _INSTALLED.is_file() else [sys.executable, "-c", "from gpt2_onnx.cli import main; main()"]

EXPORTS: dict[str, list[str]] = {
    "fp32": ["--precision", "fp32"],
    "fp16": ["--precision", "fp16"],
    "int8": ["--precision", "int8"],
    "int8, --matmul-kernel dynamic": ["--precision", "int8", "--matmul-kernel", "dynamic"],
    "int4": ["--precision", "int4"],
    "int4, --block-size 128": ["--precision", "int4", "--block-size", "128"],
}
KV_INT8 = ["--kv-cache", "int8"]
PROMPT_KERNEL = ["--prompt-kernel", "dynamic"]
REFUSED = {("fp16", "--kv-cache int8")}  # not offered: each must exit 2 with one line


@dataclass(frozen=True)
class Outcome:
    """One verify run: its export, runtime options, exit status, and report (None where it was refused)."""

    export: str
    options: str
    returncode: int
    report: dict[str, Any] | None
    message: str  # the last line of its output

    @property
    def as_expected(self) -> bool:
        if (self.export, self.options) in REFUSED:
            return self.returncode == 2 and self.report is None
        return self.returncode == 0 and self.report is not None and self.report["result"] == "pass"


def modes(export: str) -> list[list[str]]:
    """The runtime options verify is run with for ``export``: the prompt kernel only where its projections are
    MatMulNBits (int8 and int4 with the default kernel)."""
    found = [[], KV_INT8]
    if export in ("int8", "int4", "int4, --block-size 128"):
        found += [PROMPT_KERNEL, [*PROMPT_KERNEL, *KV_INT8]]
    return found


def _slug(text: str) -> str:
    """``text`` as a file name: "int8, --matmul-kernel dynamic" → "int8-matmul-kernel-dynamic"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)


def verify_all(model: str, text: Path, out: Path, threads: int) -> list[Outcome]:
    """Export ``model`` per configuration into ``out`` (reusing a finished export) and verify it in every mode."""
    out.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for export, flags in EXPORTS.items():
        folder = out / _slug(export)
        if not (folder / "manifest.json").is_file():
            made = run([*CLI, "export", "--model", model, "--opset", "17", *flags, "-o", str(folder)])
            if made.returncode != 0:
                raise SystemExit(f"export {export} failed: {(made.stderr or made.stdout).strip().splitlines()[-1]}")
        for options in modes(export):
            report = out / f"{_slug(' '.join([export, *options]))}.json"
            report.unlink(missing_ok=True)
            command = [*CLI, "verify", str(folder), *options, "--perplexity", str(text), "--threads", str(threads)]
            done = run([*command, "--report", str(report)])
            lines = (done.stdout + done.stderr).strip().splitlines()
            loaded = json.loads(report.read_text()) if report.is_file() else None
            outcome = Outcome(export, " ".join(options), done.returncode, loaded, lines[-1] if lines else "")
            print(f"{export:<32} {outcome.options or 'defaults':<40} exit {done.returncode}", flush=True)
            outcomes.append(outcome)
    return outcomes


def table(outcomes: list[Outcome]) -> list[str]:
    """Markdown rows: each combination's verdict, comparisons and perplexity change."""
    lines = [
        "| export | runtime options | verify | comparisons | perplexity | relative change | limit |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for o in outcomes:
        if o.report is None:
            verdict = "refused (exit 2), as expected" if o.as_expected else f"exit {o.returncode}: {o.message}"
            lines.append(f"| {o.export} | {o.options or 'defaults'} | {verdict} | — | — | — | — |")
            continue
        p = o.report["perplexity"]
        lines.append(
            f"| {o.export} | {o.options or 'defaults'} | {o.report['result']} | {len(o.report['comparisons'])} "
            f"| {p['export']:.4f} | {100 * p['relative']:+.3f} % | {100 * p['max_relative']:g} % |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(REPO / "checkpoints" / "pydocs-tiny"))
    parser.add_argument("--text", type=Path, default=REPO / "checkpoints" / "pydocs-tiny" / "heldout.txt")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "verify-modes")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    outcomes = verify_all(args.model, args.text, args.out, args.threads)
    first = next(o.report for o in outcomes if o.report is not None)
    source = first["perplexity"]["source"]
    environment = first["environment"]
    text = [
        "# verify over every precision and runtime mode",
        "",
        *table(outcomes),
        "",
        f"`python scripts/verify_modes.py`: `gpt2-onnx verify --perplexity` of `{Path(args.model).name}`'s exports "
        f"(opset 17) in each runtime mode, {args.threads} threads; the checkpoint's own perplexity {source:.4f} "
        f"over `{args.text.name}` (PyTorch); the limit is the precision's (fp32 0.01 %, fp16 1 %, int8 1 %, int4 "
        f"5 %), plus the int8 cache's 1 % with `--kv-cache int8`. Machine: {environment['cpu']}, "
        f"{environment['cpu_count']} logical cores, {environment['platform']}; "
        "versions: " + ", ".join(f"{k} {v}" for k, v in sorted(environment["libraries"].items())) + ".",
    ]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results = REPO / "benchmarks" / "results"
    (results / f"{stamp}-verify-modes.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    raw = [{"export": o.export, "options": o.options, "returncode": o.returncode, "report": o.report} for o in outcomes]
    (results / f"{stamp}-verify-modes.json").write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    print("\n".join(text))
    return 0 if all(o.as_expected for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
