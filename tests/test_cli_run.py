"""``gpt2-onnx run`` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--top-p", "0"), 2, "top_p")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--temperature", "0"), 2, "temperature")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--top-k", "-3"), 2, "top_k")
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


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_run_beam_search_json_one_line_per_sequence(tiny_export: Path) -> None:
    args = ["run", str(tiny_export), "-p", "Hello", "-p", "The quick brown fox", "--json", "-n", "6"]
    lines = json_lines(invoke(*args, "--num-beams", "3", "--num-return-sequences", "2", "--batch-size", "2"))
    assert [(line["index"], line["sequence"]) for line in lines] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    expected = Gpt2Onnx.load(tiny_export).generate(
        ["Hello", "The quick brown fox"], GenerationOptions(max_new_tokens=6, num_beams=3, num_return_sequences=2)
    )
    for line, result in zip(lines, expected, strict=True):
        assert line["token_ids"] == result.token_ids and line["text"] == result.text
        assert line["score"] == result.score and len(line["token_logprobs"]) == len(result.token_ids)
        assert line["options"]["num_beams"] == 3 and line["from_checkpoint"] == []
    assert lines[0]["score"] >= lines[1]["score"]


def test_run_beam_search_text_one_block_per_sequence(tiny_export: Path) -> None:
    result = invoke(
        "run", str(tiny_export), "-p", "Hello", "-n", "4", "--num-beams", "2", "--num-return-sequences", "2"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count("Hello") == 2
    assert "sequence 0, score" in result.stderr and "sequence 1, score" in result.stderr


def test_run_index_counts_across_batches(tiny_export: Path) -> None:
    lines = json_lines(invoke("run", str(tiny_export), "-p", "a", "-p", "b", "-p", "c", "--json", "-n", "2"))
    assert [line["index"] for line in lines] == [0, 1, 2]


def test_run_processor_flags(tiny_export: Path) -> None:
    args = ["run", str(tiny_export), "-p", "The quick brown fox", "--json", "-n", "10", "--ignore-eos"]
    [plain] = json_lines(invoke(*args))
    banned = plain["token_ids"][:2]
    [line] = json_lines(
        invoke(
            *args,
            "--no-repeat-ngram-size",
            "2",
            "--bad-word-ids",
            ",".join(map(str, banned)),
            "--min-p",
            "0.1",
            "--sample",
            "--seed",
            "1",
        )
    )
    options = line["options"]
    assert options["no_repeat_ngram_size"] == 2 and options["bad_words_ids"] == [banned] and options["min_p"] == 0.1
    [forced] = json_lines(invoke(*args[:-1], "--forced-eos-token-id", "50256", "-n", "3"))
    assert forced["token_ids"][-1] == 50256 and forced["finish_reason"] == "eos"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--temperature", "0.5"], "--temperature applies only with --sample"),
        (["--top-k", "5", "--min-p", "0.1"], "--top-k and --min-p apply only with --sample"),
        (["--length-penalty", "0.5"], "--length-penalty applies only with --num-beams > 1"),
        (["--early-stopping", "true"], "--early-stopping applies only with --num-beams > 1"),
        (["--num-return-sequences", "2"], "greedy decoding returns one sequence"),
        (["--num-beams", "2", "--num-return-sequences", "3"], "exceeds num_beams 2"),
        (["--num-beams", "2", "--sample"], "beam sampling"),
        (["--num-beams", "2", "--stop", "x"], "stop strings are not supported with beam search"),
        (["--bad-word-ids", "1,x"], "comma-separated token ids"),
        (["--forced-eos-token-id", "60000"], "outside [0, 50257)"),
    ],
)
def test_run_refuses_bad_combinations_in_one_line(tiny_export: Path, flags: list[str], message: str) -> None:
    assert_error(invoke("run", str(tiny_export), "-p", "x", *flags), 2, message)
