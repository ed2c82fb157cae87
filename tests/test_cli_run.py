"""``gpt2-onnx run`` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from gpt2_onnx.cli import cli
from runtimes import GenerationOptions, Gpt2Onnx
from tests.helpers import one_error_line


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def test_run_streams_the_greedy_continuation(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-p", "The meaning of life is", "-n", "8", "--ignore-eos")
    assert result.exit_code == 0, result.output
    expected = Gpt2Onnx.load(tiny_export).generate(
        "The meaning of life is", GenerationOptions(max_new_tokens=8, ignore_eos=True)
    )[0]
    assert result.stdout.startswith("The meaning of life is" + expected.text)
    assert "8 tokens" in result.stderr


def test_run_json_lines_with_batching(tiny_export: Path, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\n\nOnce upon a time\nThe quick brown fox\n")
    result = invoke("run", str(tiny_export), "--prompts", str(prompts), "--batch-size", "2", "--json", "-n", "5")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["prompt"] for line in lines] == ["Hello", "Once upon a time", "The quick brown fox"]
    for line in lines:
        assert {"prompt", "token_ids", "text", "timings", "finish_reason"} <= set(line)
        assert 1 <= len(line["token_ids"]) <= 5 and line["timings"]["prefill_ms"] > 0


def test_run_reads_the_prompt_from_stdin(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-n", "3", "--json", stdin="Once upon a time\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["prompt"] == "Once upon a time"


def test_run_sampling_with_a_seed_is_reproducible(tiny_export: Path) -> None:
    args = [
        "run",
        str(tiny_export),
        "-p",
        "Hello",
        "--sample",
        "--temperature",
        "0.8",
        "--top-p",
        "0.95",
        "--seed",
        "7",
        "--json",
        "-n",
        "10",
    ]
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0
    assert json.loads(first.stdout)["token_ids"] == json.loads(second.stdout)["token_ids"]


def assert_error(result: Result, code: int, fragment: str) -> None:
    assert result.exit_code == code, result.output
    assert fragment in one_error_line(result.output), result.output


def test_run_cuda_here_fails_with_one_line(tiny_export: Path) -> None:
    from tests.test_runtime_loading import cuda_works

    if cuda_works():
        return
    assert_error(invoke("run", str(tiny_export), "-p", "Hello", "--provider", "cuda"), 3, "CUDA")


def test_run_bad_input(tiny_export: Path, tmp_path: Path) -> None:
    assert_error(invoke("run", str(tmp_path / "none"), "-p", "x"), 2, "does not exist")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--top-p", "0"), 2, "top_p")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--temperature", "0"), 2, "temperature")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--top-k", "-3"), 2, "top_k")
    assert_error(invoke("run", str(tiny_export), "-p", "   "), 2, "empty")
    assert_error(
        invoke("run", str(tiny_export), "--prompts", str(tmp_path / "missing.txt")),
        2,
        "cannot read prompts file",
    )
    assert_error(invoke("run", str(tiny_export), "-p", "x", "-n", "500"), 2, "exceeds the model's 128 positions")
    result = invoke("run", str(tiny_export), "-p", "x", "--provider", "tpu")
    assert result.exit_code == 2 and "tpu" in result.output


def test_prepacked_weights_give_the_same_tokens(tiny_export: Path) -> None:
    args = ["run", str(tiny_export), "-p", "The quick brown fox", "--json", "-n", "8", "--ignore-eos"]
    shared, prepacked = invoke(*args), invoke(*args, "--prepack-weights")
    assert shared.exit_code == 0 and prepacked.exit_code == 0, prepacked.output
    assert json.loads(shared.stdout)["token_ids"] == json.loads(prepacked.stdout)["token_ids"]
