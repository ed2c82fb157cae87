"""One loaded model serves many threads: the same results as one thread, streaming included, and memory that stays
flat over many generations."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx


def test_many_threads_get_exactly_the_sequential_results(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    prompts = ["Hello", "The quick brown fox", "Once upon a time", "In a shocking finding"]
    jobs = [(prompts[i % 4], seed) for i, seed in enumerate(range(160))]

    def work(job: tuple[str, int]) -> list[int]:
        options = GenerationOptions(max_new_tokens=8, do_sample=True, temperature=1.3, top_k=50, seed=job[1])
        return model.generate(job[0], options)[0].token_ids

    sequential = [work(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(work, jobs))
    assert threaded == sequential
    assert len({tuple(t) for t in sequential}) > 100, "the seeds really differ"


def test_memory_is_stable_over_many_generations(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    process = psutil.Process()
    options = GenerationOptions(max_new_tokens=16, ignore_eos=True)

    def burst(count: int) -> None:
        for i in range(count):
            model.generate(["Hello", "The quick brown fox jumps"][i % 2 :], options)

    burst(50)  # warm-up: allocator arenas, caches
    settled = process.memory_info().rss
    burst(200)
    grown = process.memory_info().rss - settled
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 200 generations"


def test_runtime_is_safe_across_threads_while_streaming(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    options = GenerationOptions(max_new_tokens=12, ignore_eos=True)
    expected = model.generate("Hello", options)[0].text
    seen: list[str] = []
    lock = threading.Lock()

    def stream() -> None:
        text = "".join(model.stream("Hello", options))
        with lock:
            seen.append(text)

    threads = [threading.Thread(target=stream) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [expected] * 6
