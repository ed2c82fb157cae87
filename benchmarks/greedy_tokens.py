"""Greedy tokens of one system on the bench's decode prompt, as one JSON line: the side-by-side's sanity check that
every system computes the same model (same weights, same greedy choices), each in its own process and venv.

    python benchmarks/greedy_tokens.py ours    EXPORT_FOLDER      # gpt2-onnx's runtime (main venv)
    python benchmarks/greedy_tokens.py eager   CHECKPOINT_FOLDER  # transformers on torch (main venv)
    python benchmarks/greedy_tokens.py optimum OPTIMUM_FOLDER     # ORTModelForCausalLM (Optimum's venv)
    python benchmarks/greedy_tokens.py spec    SYSTEM_SPEC_JSON   # a bench SystemSpec, built as the worker does

``spec`` builds the system exactly as the bench worker will (a peer's ``factory``, or an ONNX folder with the
spec's runtime options) and reads its tokens through its ``greedy`` method, or, for an export folder, through
``gpt2_onnx_runtimes.generation`` on the sessions it loaded; a system with ``describe()`` adds what it reports as
``info``.

The prompt is ``gpt2_onnx_core.bench_protocol.prompt_ids`` (seeded), end-of-text is ignored, so every system
generates exactly ``--new-tokens`` tokens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpt2_onnx_core.bench_settings import BenchSettings

REPO = Path(__file__).resolve().parent.parent


def tokens_in_process(python: str, system: Sequence[str], settings: BenchSettings, vocab_size: int, label: str) -> Any:
    """This script's JSON answer for ``system`` (its arguments: kind and folder or spec), run by ``python`` on the
    bench's decode prompt; a failure ends the caller with the script's stderr."""
    command = [python, str(Path(__file__).resolve()), *system]
    command += ["--prompt-length", str(settings.decode_prompt_length), "--new-tokens", str(settings.new_tokens)]
    command += ["--seed", str(settings.seed), "--threads", str(settings.threads), "--vocab-size", str(vocab_size)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"greedy tokens of {label} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ours(folder: Path, ids: list[list[int]], new_tokens: int, threads: int) -> list[int]:
    from gpt2_onnx_runtimes.generation import Generation, GenerationOptions
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    loaded = LoadedExport.load(folder, RuntimeOptions(provider="cpu", intra_op_threads=threads, inter_op_threads=1))
    options = GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)
    return Generation(loaded, ids, options).run()[0].token_ids


def _eager(folder: Path, ids: list[list[int]], new_tokens: int, threads: int) -> list[int]:
    import numpy as np

    from gpt2_onnx_exporters.eager_system import EagerSystem

    system = EagerSystem(str(folder), seed=0, threads=threads, device="cpu", attention="eager")  # the parity reference
    system.load()
    rows, _, _ = system.greedy(np.asarray(ids, dtype=np.int64), new_tokens)
    return rows[0]


def _optimum(folder: Path, ids: list[list[int]], new_tokens: int, threads: int) -> list[int]:
    import numpy as np

    from benchmarks.optimum_system import OptimumSystem
    from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

    system = OptimumSystem(SystemSpec("onnx", "optimum", folder=str(folder)), BenchSettings(threads=threads))
    system.load()
    rows, _, _ = system.greedy(np.asarray(ids, dtype=np.int64), new_tokens)
    return rows[0]


def _spec(spec_json: str, ids: list[list[int]], new_tokens: int, threads: int) -> tuple[list[int], object]:
    import numpy as np

    from gpt2_onnx.app.bench.worker import _build  # the worker's own construction, so the check runs what is measured
    from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

    spec = SystemSpec.from_json(json.loads(spec_json))
    system = _build(spec, BenchSettings(threads=threads))
    system.load()
    greedy = getattr(system, "greedy", None)
    if greedy is not None:
        rows, _, _ = greedy(np.asarray(ids, dtype=np.int64), new_tokens)
        tokens = rows[0]
    else:  # gpt2_onnx_runtimes.bench_system.OnnxSystem: generation on the sessions it loaded
        from gpt2_onnx_runtimes.generation import Generation, GenerationOptions

        options = GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)
        tokens = Generation(system.loaded, ids, options).run()[0].token_ids  # type: ignore[attr-defined]
    describe = getattr(system, "describe", None)
    return tokens, describe() if describe is not None else None


_SYSTEMS = {"ours": _ours, "eager": _eager, "optimum": _optimum}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("system", choices=[*sorted(_SYSTEMS), "spec"])
    parser.add_argument("folder", help="the folder (or, for spec, the SystemSpec as JSON)")
    parser.add_argument("--prompt-length", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompt's token ids (bench's --prompt-seed)")
    parser.add_argument("--vocab-size", type=int, default=50257)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages
    from gpt2_onnx_core.bench_protocol import prompt_ids

    ids = prompt_ids(args.seed, 1, args.prompt_length, args.vocab_size).tolist()
    if args.system == "spec":
        tokens, info = _spec(args.folder, ids, args.new_tokens, args.threads)
        print(json.dumps({"system": args.system, "tokens": tokens, "info": info}))
        return
    tokens = _SYSTEMS[args.system](Path(args.folder), ids, args.new_tokens, args.threads)
    print(json.dumps({"system": args.system, "tokens": tokens}))


if __name__ == "__main__":
    main()
