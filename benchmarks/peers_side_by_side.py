"""gpt2-onnx beside its peers (OpenVINO GenAI, llama.cpp, CTranslate2) and PyTorch eager, on one checkpoint, in one
interleaved ``bench`` run: each system in a worker process of its own and in its own venv, driven by
``gpt2_onnx.app.bench.runner`` (a warm-up round, then rounds rotating the systems' order, task by task).
``benchmarks/peers_side_by_side.sh`` builds the venvs and the exports, then calls this (main venv):

    python benchmarks/peers_side_by_side.py --checkpoint CKPT \\
        --ours "gpt2-onnx fp32" OUT/gpt2-onnx-fp32 \\
        --ours "gpt2-onnx fp32 split" OUT/gpt2-onnx-fp32 layout=split \\
        --peer "OpenVINO fp32, f32 forced" benchmarks.openvino_system:forced_f32 OV_PYTHON OUT/openvino-fp32 \\
        --out benchmarks/results/STAMP-peers.json

``--ours LABEL FOLDER [FIELD=VALUE ...]``: an export folder on the bench's ONNX path (``SystemSpec(kind="onnx")``),
any SystemSpec field as a runtime option. ``--peer LABEL FACTORY PYTHON PATH``: a peer system, ``FACTORY`` called in
the worker of ``PYTHON``. ``--decode-contexts 512,1000``: in the same rounds, a decode run after a prompt of each
of those lengths too (``BenchSettings.decode_contexts``, ``--context-new-tokens`` new tokens each, 16 by default),
and one as long after 128 tokens that their growth divides by, for decode ms/token as the context grows
(benchmarks/peers_table.py prints them as a second table; 1,000 + 24 fills
GPT-2's 1,024 positions). Before measuring, each system's greedy tokens on the decode prompt (a process each, built
as its worker builds it) are compared with PyTorch eager's ("identical" or "splits at step k"). The figures are in
benchmarks/peers_report.py; the JSON holds them, ``gpt2-onnx bench``'s own report of the same rounds, the tokens,
what each peer reports of itself, the machine's CPU features and every venv's versions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from benchmarks import peers_report  # noqa: E402  # after the path
from benchmarks.greedy_tokens import tokens_in_process  # noqa: E402
from benchmarks.optimum_side_by_side import venv_versions  # noqa: E402
from gpt2_onnx.app.bench.run import measure  # noqa: E402  # after the path
from gpt2_onnx.app.bench.table import render_table  # noqa: E402
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec  # noqa: E402
from gpt2_onnx_core.errors import OptionError  # noqa: E402
from gpt2_onnx_core.manifest import read_manifest  # noqa: E402

BASELINE = "pytorch-eager"
# The packages whose versions each venv reports (absent ones left out).
PACKAGES = (
    "torch",
    "transformers",
    "numpy",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnx",
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
    "optimum-intel",
    "optimum",
    "nncf",
    "llama-cpp-python",
    "ctranslate2",
)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def greedy_tokens(spec: SystemSpec, checkpoint: Path, settings: BenchSettings, vocab_size: int) -> dict[str, Any]:
    """The system's greedy tokens on the decode prompt, in a process of its own (eager: the parity reference)."""
    if spec.kind == "eager":
        python, system = sys.executable, ["eager", str(checkpoint)]
    else:
        python, system = spec.python or sys.executable, ["spec", json.dumps(spec.to_json())]
    _log(f"greedy tokens: {spec.label}")
    answer: dict[str, Any] = tokens_in_process(python, system, settings, vocab_size, spec.label)
    return answer


def token_check(specs: list[SystemSpec], checkpoint: Path, settings: BenchSettings, vocab: int) -> dict[str, Any]:
    """Every system's tokens, its agreement with the baseline's, and what each system reports of itself."""
    answers = {spec.label: greedy_tokens(spec, checkpoint, settings, vocab) for spec in specs}
    reference = answers[BASELINE]["tokens"]
    return {
        "reference": BASELINE,
        "agreement": {label: peers_report.agreement(a["tokens"], reference) for label, a in answers.items()},
        "first_split": {label: peers_report.first_split(a["tokens"], reference) for label, a in answers.items()},
        "tokens": {label: a["tokens"] for label, a in answers.items()},
        "info": {label: a["info"] for label, a in answers.items() if a.get("info") is not None},
    }


def _lengths(text: str) -> tuple[int, ...]:
    """``--decode-contexts``' value; argparse turns the ArgumentTypeError into a one-line usage error."""
    try:
        return peers_report.parse_lengths(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the checkpoint folder (eager's model)")
    parser.add_argument(
        "--ours",
        nargs="+",
        action="append",
        default=[],
        metavar="ARG",
        help="LABEL FOLDER [FIELD=VALUE ...]: a gpt2-onnx export with SystemSpec runtime options (repeatable)",
    )
    parser.add_argument("--peer", nargs=4, action="append", default=[], metavar=("LABEL", "FACTORY", "PYTHON", "PATH"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--decode-contexts",
        type=_lengths,
        default=(),
        metavar="LENGTHS",
        help="also decode after prompts of these lengths, e.g. 512,1000 (decode ms/token as the context grows)",
    )
    parser.add_argument(
        "--context-new-tokens",
        type=int,
        default=BenchSettings.context_new_tokens,
        metavar="N",
        help="tokens generated after each --decode-contexts prompt (at least 2; more: less noise in their ms/token)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args(argv)
    try:
        args.settings = peers_report.peers_settings(
            args.threads, args.repeats, decode_contexts=args.decode_contexts, context_new_tokens=args.context_new_tokens
        )
    except OptionError as exc:  # BenchSettings' own rules, named as this command's flags
        flags = ("threads", "repeats", "decode_contexts", "context_new_tokens")
        parser.error(exc.render({name: "--" + name.replace("_", "-") for name in flags}))
    if not args.ours:
        parser.error("give at least one --ours LABEL FOLDER")
    try:
        args.specs = [
            SystemSpec("eager", BASELINE, model=str(args.checkpoint), seed=0),
            *(peers_report.ours_spec(values) for values in args.ours),
            *(peers_report.peer_spec(values) for values in args.peer),
        ]
    except ValueError as exc:
        parser.error(str(exc))
    labels = [spec.label for spec in args.specs]
    if len(set(labels)) != len(labels):
        parser.error(f"two systems share a label: {labels}")
    return args


def main() -> None:
    args = parse()
    specs: list[SystemSpec] = args.specs
    settings: BenchSettings = args.settings
    first_ours = next(spec for spec in specs if spec.kind == "onnx" and spec.factory is None)
    manifest = read_manifest(Path(str(first_ours.folder)))
    if settings.longest_sequence() > manifest.dims.n_positions:
        raise SystemExit(
            f"the run needs {settings.longest_sequence()} positions, the model holds {manifest.dims.n_positions}: "
            "give shorter --decode-contexts or fewer --context-new-tokens"
        )
    tokens = token_check(specs, args.checkpoint, settings, manifest.dims.vocab_size)
    _log(f"tokens vs {BASELINE}: {tokens['agreement']}")

    before, start = peers_report.cpu_seconds(), time.monotonic()
    report, raws = measure(specs, settings, manifest, _log)
    other = peers_report.other_work(before, peers_report.cpu_seconds(), time.monotonic() - start)
    pythons = sorted({spec.python or sys.executable for spec in specs})
    # venv folder name → its python and versions; the main venv (eager, gpt2-onnx) as "main"
    venvs = {
        "main" if python == sys.executable else Path(python).parent.parent.name: {
            "python": python,
            "versions": {n: v for n, v in venv_versions(python, PACKAGES).items() if v},
        }
        for python in pythons
    }
    result = {
        **report.to_json(),
        "peers": peers_report.figures(raws, BASELINE, settings),
        "specs": [spec.to_json() for spec in specs],
        "greedy": tokens,
        "cpu_flags": peers_report.cpu_flags(),
        "other_work": other,  # other processes' CPU use during the rounds
        "venvs": venvs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(render_table(report))


if __name__ == "__main__":
    main()
