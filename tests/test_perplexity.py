"""Perplexity: the windows and what they score, the export against the source model (tiny model and the trained
checkpoint), ``verify --perplexity`` and ``bench --perplexity`` and their one-line errors for bad text files."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpt2_onnx_core import precisions
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.perplexity import PerplexityText, Window, plan_windows, target_log_probs
from gpt2_onnx_core.tolerances import PerplexityLimit
from tests.helpers import invoke

ROOT = Path(__file__).resolve().parent.parent
PYDOCS = ROOT / "checkpoints" / "pydocs-tiny"
TEXT = (
    "The tokenizer splits text into tokens. Each window of the text is scored by both models, and the "
    "perplexity is the exponential of the mean negative log-likelihood of every scored token. "
) * 3
FAST = ["--steps", "2", "--batch-size", "1"]
BENCH_SMALL = [
    "--repeats", "1", "--warmup", "0", "--new-tokens", "2", "--prompt-lengths", "4",
    "--decode-prompt-length", "4", "--batch-size", "1", "--batch-prompt-length", "3",
]  # fmt: skip


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _hf_guide_perplexity(model: Any, ids: list[int], window: int, stride: int) -> float:
    """Hugging Face's perplexity guide's loop, written out independently: labels with -100 for context tokens,
    the model's own shifted cross-entropy, each window weighted by the labels its loss averages (the guide
    subtracts one per window, which is one too many wherever the window's first label is already -100)."""
    import torch

    tokens = torch.tensor([ids])
    nll_sum, counted, previous_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + window, len(ids))
        target_len = end - previous_end
        window_ids = tokens[:, begin:end]
        labels = window_ids.clone()
        labels[:, :-target_len] = -100
        with torch.no_grad():
            loss = model(window_ids, labels=labels).loss
        valid = int((labels[:, 1:] != -100).sum())  # the model shifts labels left: label 0 is never scored
        nll_sum += float(loss) * valid
        counted += valid
        previous_end = end
        if end == len(ids):
            break
    return math.exp(nll_sum / counted)


def test_each_window_scores_only_what_the_previous_did_not() -> None:
    plan = plan_windows(10, window=6, stride=3)
    assert plan.windows == (Window(0, 6, 1), Window(3, 9, 6), Window(6, 10, 9))
    assert plan.scored == 9  # every token but the first
    same = plan_windows(10, window=4, stride=4)  # no overlap: each later window's first token has no context
    assert same.windows == (Window(0, 4, 1), Window(4, 8, 5), Window(8, 10, 9)) and same.scored == 7
    assert plan_windows(5, window=1024, stride=512).windows == (Window(0, 5, 1),)
    assert plan_windows(2, window=2, stride=1).scored == 1


@pytest.mark.parametrize(
    ("tokens", "window", "stride", "error"),
    [(1, 8, 4, InvalidInputError), (0, 8, 4, InvalidInputError), (10, 1, 1, OptionError), (10, 8, 9, OptionError)],
)
def test_impossible_plans_are_refused(tokens: int, window: int, stride: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        plan_windows(tokens, window, stride)


def test_log_probabilities_are_log_softmax_in_float64() -> None:
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((300, 50)) * 30).astype(np.float32)  # more rows than one chunk
    targets = rng.integers(0, 50, 300)
    wide = logits.astype(np.float64)
    expected = wide[np.arange(300), targets] - np.log(np.exp(wide - wide.max(1, keepdims=True)).sum(1)) - wide.max(1)
    np.testing.assert_allclose(target_log_probs(logits, targets), expected, rtol=0, atol=1e-12)


def test_a_known_text_scores_the_tokens_the_windows_say(tiny_export: Path, text_file: Path) -> None:
    from gpt2_onnx_runtimes import Gpt2Onnx

    model = Gpt2Onnx.load(tiny_export)
    n = len(model.encode(TEXT))
    found = model.perplexity(TEXT, window=16, stride=8)
    expected_windows = math.ceil((n - 16) / 8) + 1  # starts 0, 8, ... until a window reaches the end
    assert found.plan.n_tokens == n and found.plan.scored == n - 1 and len(found.plan.windows) == expected_windows
    assert model.perplexity(TEXT, window=16, stride=16).plan.scored == n - math.ceil(n / 16)
    assert model.perplexity(TEXT).plan.window == 128 and model.perplexity(TEXT).plan.stride == 64  # the model's
    with pytest.raises(OptionError, match="exceeds the model's 128 positions"):
        model.perplexity(TEXT, window=129)


def test_source_side_is_hugging_faces_recipe(tiny_model: Any, tiny_export: Path, text_file: Path) -> None:
    from gpt2_onnx.app.perplexity import read_for_export, source_perplexity
    from gpt2_onnx_runtimes.export_folder import ExportFolder

    text = read_for_export(text_file, ExportFolder.open(tiny_export), window=16, stride=8)
    ours = source_perplexity(tiny_model, text).value
    assert ours == pytest.approx(_hf_guide_perplexity(tiny_model, list(text.ids), 16, 8), rel=1e-6)


@pytest.mark.parametrize(("window", "stride"), [(16, 8), (16, 16), (128, 64)])
def test_export_equals_source_on_the_tiny_model(
    tiny_model: Any, tiny_export: Path, text_file: Path, window: int, stride: int
) -> None:
    from gpt2_onnx.app.perplexity import compare_perplexity, read_for_export
    from gpt2_onnx_runtimes.export_folder import ExportFolder
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    export = ExportFolder.open(tiny_export)
    text = read_for_export(text_file, export, window, stride)
    with LoadedExport.open(export, RuntimeOptions()) as loaded:
        comparison = compare_perplexity(tiny_model, loaded, text)
    assert comparison.ok and abs(comparison.relative) < 1e-5  # fp32: measured ~1e-9
    assert comparison.plan.scored == text.plan.scored


@pytest.fixture(scope="module")
def pydocs_export(scaled_export: Callable[..., Path]) -> Path:
    """The trained checkpoint's fp32 export: test_fp32_rule's (``scaled_export``, made once per session, its own
    parity check passed). Read-only."""
    if not (PYDOCS / "model.safetensors").is_file():
        pytest.skip("checkpoints/pydocs-tiny is not in this checkout")
    return scaled_export(str(PYDOCS))


def test_export_equals_source_on_the_trained_checkpoint(pydocs_export: Path, tmp_path: Path) -> None:
    from gpt2_onnx.app.perplexity import compare_perplexity, read_for_export
    from gpt2_onnx_exporters.source import load_source
    from gpt2_onnx_runtimes.export_folder import ExportFolder
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    part = tmp_path / "heldout-part.txt"  # the held-out text's first 6,000 characters: a few windows, fast
    part.write_text((PYDOCS / "heldout.txt").read_text(encoding="utf-8")[:6000], encoding="utf-8")
    export = ExportFolder.open(pydocs_export)
    text = read_for_export(part, export, window=512, stride=256)
    with LoadedExport.open(export, RuntimeOptions()) as loaded:
        comparison = compare_perplexity(load_source(str(PYDOCS)).model, loaded, text)
    assert comparison.plan.scored == text.plan.n_tokens - 1 and len(comparison.plan.windows) >= 3
    assert comparison.source.value < 200  # trained: far below the vocabulary's 50,257 of a uniform guess
    assert comparison.ok and abs(comparison.relative) < 1e-5  # fp32 limit 1e-4; measured ~1e-8


def test_verify_reports_both_perplexities(tiny_export: Path, text_file: Path) -> None:
    result = invoke(
        "verify", str(tiny_export), *FAST, "--perplexity", str(text_file), "--perplexity-window", "32", "--json"
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["perplexity"]
    assert found["window"] == 32 and found["stride"] == 16 and found["scored_tokens"] == found["tokens"] - 1
    assert found["source"] > 1 and abs(found["relative"]) < 1e-5 and found["ok"] and found["max_relative"] == 1e-4
    table = invoke("verify", str(tiny_export), *FAST, "--perplexity", str(text_file), "--perplexity-stride", "100")
    assert table.exit_code == 0, table.output
    assert "Perplexity of" in table.stdout and "window" in table.stdout and "stride 100" in table.stdout


def test_a_perplexity_beyond_the_limit_fails_verify(
    int8_export_for_perplexity: Path, text_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = PerplexityLimit(1e-12, "test: any change at all")
    strict = tuple(replace(p, perplexity=limit) if p.flag == "int8" else p for p in precisions.PRECISIONS)
    monkeypatch.setattr(precisions, "PRECISIONS", strict)  # the table verify reads the limit from
    result = invoke("verify", str(int8_export_for_perplexity), *FAST, "--perplexity", str(text_file), "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["result"] == "fail" and not report["perplexity"]["ok"]
    assert any(line.startswith("perplexity: export") for line in report["failures"])


@pytest.fixture
def int8_export_for_perplexity(shared_export: Callable[..., Path]) -> Path:
    return shared_export(precision="int8")


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "one.txt").write_text("a", encoding="utf-8")
    return {
        "missing": (tmp_path / "missing.txt", "does not exist"),
        "folder": (tmp_path, "is not a file"),
        "empty": (tmp_path / "empty.txt", "is empty"),
        "undecodable": (tmp_path / "latin1.txt", "is not UTF-8 text (byte 3"),
        "one token": (tmp_path / "one.txt", "has 1 token; perplexity needs at least 2"),
    }


@pytest.mark.parametrize("case", ["missing", "folder", "empty", "undecodable", "one token"])
def test_bad_text_files_are_refused_before_any_model_loads(
    tiny_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    import gpt2_onnx.app.verify

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded before the text was checked")

    monkeypatch.setattr(gpt2_onnx.app.verify, "load_source", no_model)
    path, message = _bad_files(tmp_path)[case]
    result = invoke("verify", str(tiny_export), "--perplexity", str(path))
    assert result.exit_code == 2, result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: perplexity text") and message in error


def test_window_options_need_a_text_and_a_window_that_fits(tiny_export: Path, text_file: Path) -> None:
    alone = invoke("verify", str(tiny_export), "--perplexity-window", "16")
    assert alone.exit_code == 2 and "--perplexity-window applies only with --perplexity" in alone.stderr
    too_long = invoke("verify", str(tiny_export), "--perplexity", str(text_file), "--perplexity-window", "200")
    assert too_long.exit_code == 2 and "--perplexity-window 200 exceeds the model's 128 positions" in too_long.stderr
    stride = invoke("bench", str(tiny_export), *BENCH_SMALL, "--perplexity", str(text_file), "--perplexity-stride", "0")
    assert stride.exit_code == 2 and "--perplexity-stride must be 1..128" in stride.stderr
    missing = invoke("bench", str(tiny_export), *BENCH_SMALL, "--perplexity", "nowhere.txt")
    assert missing.exit_code == 2 and "perplexity text 'nowhere.txt' does not exist" in missing.stderr


def test_bench_reports_perplexity_per_system(tiny_export: Path, text_file: Path) -> None:
    args = ["bench", str(tiny_export), *BENCH_SMALL, "--perplexity", str(text_file), "--perplexity-window", "32"]
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    n = report["perplexity"]["tokens"]
    assert report["perplexity"]["window"] == 32 and report["perplexity"]["scored_tokens"] == n - 1
    eager, onnx = report["systems"]["pytorch-eager"], report["systems"][tiny_export.name]
    assert eager["perplexity"] > 1 and onnx["perplexity"] == pytest.approx(eager["perplexity"], rel=1e-5)
    assert report["ratios"][tiny_export.name]["perplexity"] == pytest.approx(1.0, abs=1e-5)
    table = invoke("bench", str(tiny_export), *BENCH_SMALL, "--no-eager", "--perplexity", str(text_file))
    assert table.exit_code == 0, table.output
    assert f"perplexity, {n - 1} tokens (window 128, stride 64)" in table.stdout


def test_perplexity_text_reads_through_the_given_encoder(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("abcdef", encoding="utf-8")
    text = PerplexityText.read(path, lambda s: [ord(c) for c in s], n_positions=4)
    assert text.ids == tuple(map(ord, "abcdef")) and text.plan.window == 4 and text.plan.stride == 2
    assert text.plan.scored == 5
