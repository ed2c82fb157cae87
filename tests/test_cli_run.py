"""``gpt2-onnx run`` through click's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from tests.conftest import cuda_works
from tests.helpers import edit_manifest, invoke, one_error_line


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
    prompts.write_text("Hello\nOnce upon a time\nThe quick brown fox\n")
    result = invoke("run", str(tiny_export), "--prompts", str(prompts), "--batch-size", "2", "--json", "-n", "5")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["prompt"] for line in lines] == ["Hello", "Once upon a time", "The quick brown fox"]
    assert [(line["index"], line["line"]) for line in lines] == [(0, 1), (1, 2), (2, 3)]  # across batches too
    for line in lines:
        assert {"index", "line", "prompt", "token_ids", "text", "timings", "finish_reason"} <= set(line)
        assert 1 <= len(line["token_ids"]) <= 5 and line["timings"]["prefill_ms"] > 0


def test_blank_lines_in_a_prompts_file_are_refused_not_dropped(tiny_export: Path, tmp_path: Path) -> None:
    """A dropped line would shift every later result against the file's lines."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\n\nOnce upon a time\n   \nThe quick brown fox\n")
    result = invoke("run", str(tiny_export), "--prompts", str(prompts), "--json", "-n", "2")
    assert_error(result, 2, "blank lines (lines 2, 4)")
    assert result.stdout == ""


def test_json_lines_of_p_prompts_carry_their_index_only(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-p", "Hello", "-p", "Once upon a time", "--json", "-n", "2")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["index"] for line in lines] == [0, 1] and all("line" not in line for line in lines)


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


@pytest.mark.skipif(cuda_works(), reason="this machine has a working CUDA provider")
def test_run_cuda_here_fails_with_one_line(tiny_export: Path) -> None:
    assert_error(invoke("run", str(tiny_export), "-p", "Hello", "--provider", "cuda"), 3, "CUDA")


def test_run_bad_input(tiny_export: Path, tmp_path: Path) -> None:
    assert_error(invoke("run", str(tmp_path / "none"), "-p", "x"), 2, "does not exist")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--top-p", "0"), 2, "--top-p must lie in")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--temperature", "0"), 2, "--temperature")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "--sample", "--top-k", "-3"), 2, "--top-k must be")
    assert_error(invoke("run", str(tiny_export), "-p", "   "), 2, "empty")
    assert_error(
        invoke("run", str(tiny_export), "--prompts", str(tmp_path / "missing.txt")),
        2,
        "cannot read prompts file",
    )
    assert_error(invoke("run", str(tiny_export), "-p", "x", "-n", "500"), 2, "exceeds the model's 128 positions")
    assert_error(invoke("run", str(tiny_export), "-p", "x", "-n", "0"), 2, "--max-new-tokens must be >= 1")
    result = invoke("run", str(tiny_export), "-p", "x", "--provider", "tpu")
    assert result.exit_code == 2 and "tpu" in result.output


@pytest.mark.parametrize("layout", ["merged", "split"])
def test_every_session_layout_gives_the_same_tokens(tiny_export: Path, layout: str) -> None:
    args = ["run", str(tiny_export), "-p", "The quick brown fox", "--json", "-n", "8", "--ignore-eos"]
    default, chosen = invoke(*args), invoke(*args, "--layout", layout)
    assert default.exit_code == 0 and chosen.exit_code == 0, chosen.output
    assert json.loads(default.stdout)["token_ids"] == json.loads(chosen.stdout)["token_ids"]


def test_no_single_row_head_reaches_the_runtime_and_gives_the_same_tokens(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-single-row-head loads the export without the tied table's transposed copy (RuntimeOptions), for one
    row and for a batch, and chooses the same greedy tokens as the default."""
    opened: list[bool] = []
    real_open = Gpt2Onnx.open.__func__  # type: ignore[attr-defined]

    def recording_open(cls: type[Gpt2Onnx], export: Any, options: Any = None) -> Gpt2Onnx:
        opened.append(options.single_row_head)
        return real_open(cls, export, options)  # type: ignore[no-any-return]

    monkeypatch.setattr(Gpt2Onnx, "open", classmethod(recording_open))
    for batch in ("1", "2"):
        args = ["run", str(tiny_export), "-p", "The quick brown fox", "-p", "Hello", "--json", "--batch-size", batch]
        default, plain = invoke(*args), invoke(*args, "--no-single-row-head")
        assert default.exit_code == 0 and plain.exit_code == 0, plain.output
        tokens = [[json.loads(line)["token_ids"] for line in r.stdout.splitlines()] for r in (default, plain)]
        assert tokens[0] == tokens[1]
    assert opened == [True, False, True, False]
    from gpt2_onnx.cli.run_cmd import run
    from gpt2_onnx.cli.serve_cmd import serve

    for command in (run, serve):  # the flag's default is the runtime's own (written twice: the CLI imports no runtime)
        default = next(param.default for param in command.params if param.name == "single_row_head")
        assert default == RuntimeOptions().single_row_head


@pytest.mark.parametrize(
    "option",
    [["--temperature", "0.5"], ["--top-k", "5"], ["--top-p", "0.9"], ["--seed", "7"], ["--temperature", "1.0"]],
)
def test_sampling_options_without_sample_are_refused(tiny_export: Path, option: list[str]) -> None:
    """Greedy decoding would ignore them; even a value equal to the default is refused when given."""
    result = invoke("run", str(tiny_export), "-p", "Hi", *option)
    assert_error(result, 2, f"{option[0]} applies only when sampling: pass --sample too")
    assert result.stdout == ""


def test_sampling_options_together_are_named_together(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-p", "Hi", "--top-k", "5", "--top-p", "0.9")
    assert_error(result, 2, "--top-k and --top-p apply only when sampling: pass --sample too")


def test_options_without_effect_are_refused(tiny_export: Path) -> None:
    assert_error(
        invoke("run", str(tiny_export), "-p", "Hi", "--json", "--no-stream"), 2, "--no-stream applies only without"
    )
    result = invoke("run", str(tiny_export), "-p", "Hi", "--layout", "tiles")
    assert result.exit_code == 2 and "tiles" in result.output


def test_the_summary_says_why_generation_stopped(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-p", "Hello", "-n", "1", "--ignore-eos")
    assert result.exit_code == 0, result.output
    assert "[1 token, stopped at the length limit (--max-new-tokens); prefill" in result.stderr


def test_random_weights_say_their_text_is_noise(copy_export: Callable[[], Path]) -> None:
    """The note follows the manifest's source; that a random:NAME export records it so, and run then prints the
    note, tests/test_scripts.py's offline demo shows end to end."""

    def from_random_weights(manifest: dict[str, object]) -> None:
        model = manifest["model"]
        assert isinstance(model, dict)
        model.update(source="random:tiny", seed=0)

    folder = copy_export()
    edit_manifest(folder, from_random_weights)
    result = invoke("run", str(folder), "-p", "Hello", "-n", "3")
    assert result.exit_code == 0, result.output
    note = [line for line in result.stderr.splitlines() if line.startswith("Note: ")]
    assert note and "random weights (random:tiny, seed 0)" in note[0], result.stderr
    assert "gpt2-onnx export --model openai-community/gpt2 -o NEW_FOLDER" in note[0]
    failed = invoke("run", str(folder), "-p", "\ud83d", "-n", "3")  # the note is for a run that worked
    assert failed.exit_code == 2 and failed.output.count("\n") == 1 and failed.output.startswith("Error: ")


def test_a_checkpoint_export_gets_no_such_note(tiny_export: Path) -> None:
    result = invoke("run", str(tiny_export), "-p", "Hello", "-n", "2")
    assert result.exit_code == 0 and "random weights" not in result.stderr


def test_generation_options_in_the_api_name_parameters(tiny_export: Path) -> None:
    """The same rule in the Python API: parameters, not flags, in its messages."""
    with pytest.raises(InvalidInputError, match=r"^top_k applies only when sampling: pass do_sample too"):
        GenerationOptions(top_k=5)
    with pytest.raises(InvalidInputError, match=r"^max_new_tokens must be >= 1"):
        GenerationOptions(max_new_tokens=0)


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
        (["--temperature", "0.5"], "--temperature applies only when sampling: pass --sample too"),
        (["--top-k", "5", "--min-p", "0.1"], "--top-k and --min-p apply only when sampling: pass --sample too"),
        (["--length-penalty", "0.5"], "--length-penalty applies only to beam search: pass --num-beams > 1 too"),
        (["--early-stopping", "true"], "--early-stopping applies only to beam search: pass --num-beams > 1 too"),
        (["--num-return-sequences", "2"], "greedy decoding returns one sequence"),
        (["--num-beams", "2", "--num-return-sequences", "3"], "exceeds --num-beams 2"),
        (["--num-beams", "2", "--sample"], "beam sampling"),
        (["--num-beams", "2", "--stop", "x"], "--stop strings are not supported with beam search (--num-beams > 1)"),
        (["--bad-word-ids", "1,x"], "comma-separated token ids"),
        (["--forced-eos-token-id", "60000"], "outside [0, 50257)"),
    ],
)
def test_run_refuses_bad_combinations_in_one_line(tiny_export: Path, flags: list[str], message: str) -> None:
    assert_error(invoke("run", str(tiny_export), "-p", "x", *flags), 2, message)


def test_run_refuses_a_prompt_that_is_not_text_in_one_line(tiny_export: Path, tmp_path: Path) -> None:
    """A lone surrogate (what Python makes of command-line bytes that are not UTF-8) and bytes that are not UTF-8
    on stdin or in a --prompts file: exit 2 and one line, not a tokenizer's TypeError (exit 70)."""
    given = invoke("run", str(tiny_export), "-p", "ok \ud83d", "-n", "2")
    assert given.exit_code == 2 and "prompt 0 is not valid Unicode: a lone surrogate U+D83D" in one_error_line(
        given.output
    )
    not_utf8 = b"\xed\xa0\xbd caf\xe9"
    piped = subprocess.run(
        [sys.executable, "-m", "gpt2_onnx", "run", str(tiny_export), "-n", "2"],
        input=not_utf8,
        capture_output=True,
        timeout=120,
    )
    stderr = piped.stderr.decode()
    assert piped.returncode == 2 and stderr.count("\n") == 1, stderr
    assert "lone surrogate" in stderr or "is not UTF-8 text" in stderr  # surrogateescape (C locale) or strict
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes(b"fine\n" + not_utf8 + b"\n")
    from_file = invoke("run", str(tiny_export), "--prompts", str(prompts), "-n", "2")
    assert from_file.exit_code == 2 and "can't decode byte 0xed" in one_error_line(from_file.output)
