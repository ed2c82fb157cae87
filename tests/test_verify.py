"""``gpt2-onnx verify``: passes on a good export, fails with figures on each planted fault."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import Result

import gpt2_onnx.app.parity_suite
import gpt2_onnx.app.verify
import gpt2_onnx_runtimes.generation
from gpt2_onnx.app.parity_suite import ParitySuite
from gpt2_onnx.app.verify import VerifyOptions, verify_export
from gpt2_onnx_core.parity import ParityReport
from gpt2_onnx_core.precisions import tolerance_for
from tests import faults
from tests.conftest import cuda_works
from tests.helpers import invoke, one_error_line

FAST = ("--steps", "6", "--batch-size", "3")


def test_good_export_passes_with_a_full_report(tiny_export: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = invoke("verify", str(tiny_export), *FAST, "--report", str(report_path))
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stderr and "present.* (4)" in result.stdout
    report = json.loads(report_path.read_text())
    assert report["result"] == "pass" and report["failures"] == []
    checks = {c["check"] for c in report["comparisons"]}
    for expected in (
        "prefill",
        "decode step 6",
        "decode, empty past",
        "past 0 + 1 new",
        "past 127 + 1 new",
        "past 4 + 3 new",
    ):
        assert expected in checks
    assert any(c.startswith("padded batch row 2") for c in checks)
    assert any(c.startswith("free-running greedy row 2") for c in checks)
    assert any(c.startswith("golden case") for c in checks)
    logits = [c for c in report["comparisons"] if c["tensor"] == "logits"]
    assert all({"max_abs", "max_rel", "top1", "kl", "atol"} <= set(c) for c in logits)
    assert report["tolerance"]["arithmetic"]["factor"] > 1 and report["tolerance"]["greedy_exact"] is True
    assert all(c["source_error"] > 0 and c["atol"] > c["source_error"] for c in logits)
    assert report["environment"]["libraries"]["onnxruntime-gpu"] or report["environment"]["libraries"]["onnxruntime"]
    assert report["provider"] == "CPUExecutionProvider" and report["environment"]["cpu_count"]
    assert all(f["ok"] for f in report["files"]) and {f["name"] for f in report["files"]} >= {"model.onnx.data"}


def test_json_prints_the_report_on_stdout_and_report_writes_it_too(tiny_export: Path, tmp_path: Path) -> None:
    """--json is a flag on every command (JSON on stdout instead of text); --report PATH is verify's file."""
    report = tmp_path / "report.json"
    result = invoke("verify", str(tiny_export), "--steps", "2", "--batch-size", "2", "--json", "--report", str(report))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["result"] == "pass"  # the whole of stdout is the JSON document
    assert json.loads(report.read_text()) == json.loads(result.stdout)


@pytest.mark.parametrize("where", ["-", "missing/report.json"])
def test_a_report_path_that_cannot_be_written_is_refused_before_any_work(
    tiny_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("verify ran before its --report path was checked")

    monkeypatch.setattr(gpt2_onnx.app.verify, "verify_export", never)
    monkeypatch.chdir(tmp_path)
    result = invoke("verify", str(tiny_export), "--report", where)
    assert result.exit_code == 2, result.output
    expected = "--json prints the report on stdout" if where == "-" else "the folder 'missing' does not exist"
    assert expected in one_error_line(result.output)


def run_faulty(folder: Path) -> tuple[Result, dict[str, object]]:
    report = folder.parent / "report.json"
    result = invoke("verify", str(folder), *FAST, "--report", str(report))
    return result, json.loads(report.read_text())


def assert_fails_on(result: Result, report: dict[str, object], *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.output.count("Error: verify failed") == 1
    failures = report["failures"]
    assert isinstance(failures, list) and failures
    text = "\n".join(failures)
    for fragment in fragments:
        assert fragment in text, text


def test_corrupted_weight_fails(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    faults.corrupt_weight(folder, "transformer.h.1.mlp.c_fc.weight", refresh=True)
    result, report = run_faulty(folder)
    assert_fails_on(result, report, "prefill: logits, max|Δ|", "decode step 1: logits", "golden case")


def test_corrupted_weight_without_manifest_update_fails_twice(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    faults.corrupt_weight(folder, "transformer.h.0.attn.c_attn.weight", refresh=False)
    result, report = run_faulty(folder)
    assert_fails_on(result, report, "file model.onnx.data: sha256", "prefill: logits")


def test_swapped_kv_outputs_fail(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    faults.swap_kv_outputs(folder, "decode", "present.0.key", "present.1.key")
    result, report = run_faulty(folder)
    assert_fails_on(result, report, "present.0.key", "present.1.key")
    assert "prefill: present.0.key" not in "\n".join(report["failures"])  # type: ignore[arg-type]


def test_human_output_lists_every_failure_in_full(copy_export: Callable[[], Path]) -> None:
    """The table folds the presents of all layers into one row; the list below it must still name each failure."""
    folder = copy_export()
    faults.swap_kv_outputs(folder, "decode", "present.0.key", "present.1.key")
    result = invoke("verify", str(folder), *FAST, "--report", str(folder.parent / "report.json"))
    assert result.exit_code == 1, result.output
    failed = [c for c in json.loads((folder.parent / "report.json").read_text())["comparisons"] if not c["ok"]]
    assert len(failed) > 5  # more than the old error line showed
    listed = result.stdout.split(f"Failures ({len(failed)}):\n", 1)[1].splitlines()
    assert len(listed) == len(failed)
    for comparison, line in zip(failed, listed, strict=True):
        assert line.startswith(f"  {comparison['check']}: {comparison['tensor']}, max|Δ| "), line
        assert f"(tol {comparison['atol']:.3g})" in line, line
    assert {"present.0.key", "present.1.key"} <= {c["tensor"] for c in failed}
    assert f"Error: verify failed: {len(failed)} failures, listed above" in result.stderr


def test_changed_position_rule_in_the_graph_fails(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    faults.shift_positions(folder, "prefill")
    result, report = run_faulty(folder)
    assert_fails_on(result, report, "prefill: logits", "padded batch row")


def test_changed_position_rule_in_the_runtime_fails(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def ignore_padding(mask: np.ndarray) -> np.ndarray:  # arange: wrong for left-padded rows
        return np.broadcast_to(np.arange(mask.shape[1], dtype=np.int64), mask.shape).copy()

    monkeypatch.setattr(gpt2_onnx.app.parity_suite, "position_ids", ignore_padding)
    monkeypatch.setattr(gpt2_onnx_runtimes.generation, "position_ids", ignore_padding)
    report = verify_export(VerifyOptions(tiny_export, steps=4, batch_size=3))
    assert not report.ok
    failed = {c.check for c in report.parity.failures}
    assert any(check.startswith("padded batch row") for check in failed)
    assert not any(check in ("prefill", "decode step 1") for check in failed), "unpadded checks stay exact"


@pytest.fixture(scope="module")
def int8_export(shared_export: Callable[..., Path]) -> Path:
    return shared_export(precision="int8")


def test_int8_export_passes_and_states_its_limits(int8_export: Path) -> None:
    """Reduced precisions are judged by top-1 and KL: the human report must say so, with the limits."""
    result = invoke("verify", str(int8_export), *FAST)
    assert result.exit_code == 0, result.output
    tolerance = tolerance_for("int8")
    [line] = [line for line in result.stdout.splitlines() if line.startswith("Tolerances (int8): ")]
    assert (
        f"top-1 ≥ {tolerance.min_top1:.0%} (near ties ≤ {tolerance.near_tie:.3g} apart left out), "
        f"KL ≤ {tolerance.max_kl:.3g}" in line
    ), line
    assert "reported, not judged: max |Δlogits|, max |ΔKV|, greedy divergence" in line, line
    assert "Failures" not in result.stdout and "PASS" in result.stderr
    # each row says what it compares with: a quantized export's golden.json is its own output, not the source's
    rows = [row for row in result.stdout.splitlines() if row.startswith(("golden case", "prefill ", "free-running"))]
    golden = [row for row in rows if row.startswith("golden case")]
    assert golden and all("golden.json (this export, when made)" in row for row in golden), rows
    assert all("source model" in row for row in rows if row not in golden), rows


def test_fp32_golden_rows_compare_with_the_source_models_output(tiny_export: Path) -> None:
    result = invoke("verify", str(tiny_export), *FAST)
    assert result.exit_code == 0, result.output
    golden = [row for row in result.stdout.splitlines() if row.startswith("golden case")]
    assert golden and all("golden.json (source model)" in row for row in golden), result.stdout


def test_tolerance_lines_name_every_limit_in_force() -> None:
    rule = tolerance_for("float32").arithmetic
    assert rule is not None
    assert tolerance_for("float32").describe() == (
        f"top-1 ≥ 100%, logits and KV: max |Δ| from float64 ≤ {rule.factor:g} × float32 source's + "
        f"{rule.floor:.2g} × max |value|, KL ≤ 1e-06, greedy tokens identical"
    )
    assert tolerance_for("int4").describe() == (
        "KL ≤ 0.1; reported, not judged: top-1, max |Δlogits|, max |ΔKV|, greedy divergence"
    )


class _CountingReference:
    """Stands in for transformers: greedy continues each prompt with its last id + 1, + 2, ..."""

    def greedy(self, ids: np.ndarray, mask: np.ndarray, steps: int, eos_token_id: int | None) -> np.ndarray:
        return ids[:, -1:] + np.arange(1, steps + 1)  # (1, steps)


def test_free_running_greedy_names_the_row_that_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are compared one at a time; the detail must still name the batch row, not row 0."""

    def generate(loaded: object, prompts: list[tuple[int, ...]], options: object) -> list[SimpleNamespace]:
        rows = [[prompt[-1] + step for step in range(1, 5)] for prompt in prompts]
        rows[2][1] = 7  # row 2 diverges at step 1
        return [SimpleNamespace(token_ids=row) for row in rows]

    monkeypatch.setattr(gpt2_onnx.app.parity_suite, "generate_ids", generate)
    loaded: Any = None  # never run: generate_ids is replaced
    reference: Any = _CountingReference()
    suite = ParitySuite(loaded, reference, tolerance_for("float32"), ParityReport())
    suite.free_running_greedy([(10,), (20,), (30,), (40,)], steps=4)
    [failure] = suite.report.failures
    assert failure.check == "free-running greedy row 2, 4 tokens"
    assert failure.detail == "row 2 diverges at step 1: 7 vs expected 32"


def test_missing_export_folder(tmp_path: Path) -> None:
    result = invoke("verify", str(tmp_path / "none"))
    assert result.exit_code == 2 and "Error: export folder" in result.output


def test_a_source_model_of_other_dimensions_is_refused_before_any_graph_runs(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`verify tiny --model random:distilgpt2` once ended on a cut-off ONNX Runtime message; now one line, exit 2."""
    from gpt2_onnx_runtimes.session import LoadedExport

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the export must not be loaded or run")

    monkeypatch.setattr(LoadedExport, "load", never)
    result = invoke("verify", str(tiny_export), "--model", "random:distilgpt2", *FAST)
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("Error: the source model 'random:distilgpt2' is not the export's model: "), line
    for mismatch in ("n_layer 6 != 2", "n_head 12 != 4", "n_embd 768 != 64", "n_positions 1024 != 128"):
        assert mismatch in line, line
    assert "vocab_size" not in line and "Traceback" not in result.output


def test_files_are_checked_before_the_source_model_loads(
    copy_export: Callable[[], Path], monkeypatch: pytest.MonkeyPatch
) -> None:

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the source model must not be loaded")

    monkeypatch.setattr(gpt2_onnx.app.verify, "load_source", never)
    folder = copy_export()
    (folder / "golden.json").unlink()
    with (folder / "tokenizer.json").open("ab") as handle:
        handle.write(b"\n")
    result = invoke("verify", str(folder), *FAST)
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert "lacks golden.json" in line and "tokenizer.json has" in line and "nothing was compared" in line, line
    assert "load source model" not in result.output


def test_reduced_precision_rows_show_agreement_over_all_positions(tmp_path: Path, int8_export: Path) -> None:
    """A folded row's top-1 counts every position it compared, not its worst single one, and figures no limit
    applies to are in parentheses."""
    report_path = tmp_path / "report.json"
    result = invoke("verify", str(int8_export), *FAST, "--report", str(report_path))
    assert result.exit_code == 0, result.output
    comparisons = json.loads(report_path.read_text())["comparisons"]
    steps = [c for c in comparisons if c["check"].startswith("decode step ") and c["tensor"] == "logits"]
    counted = [c for c in steps if "top1" in c]  # a comparison of near ties alone has no top-1
    agreed = sum(c["top1"] * c["positions"] for c in counted) / sum(c["positions"] for c in counted)
    [row] = [line for line in result.stdout.splitlines() if line.startswith("decode steps") and " logits " in line]
    assert f"{agreed:.1%}" in row.split(), row
    assert "(" in row and "top-1: agreement over every position" in result.stdout
    assert "(…): reported, not judged at this precision" in result.stdout


def test_no_detail_or_name_is_cut_mid_phrase() -> None:
    """Once: `…vs expected 4801 (reported;` — the table cut details at 60 characters and names at 44."""
    from gpt2_onnx.app.report_table import render_table
    from gpt2_onnx_core.parity import Comparison

    detail = "row 2 diverges at step 0: 5546 vs expected 4801 (reported; not judged at this precision)"
    check = "free-running greedy row 2, 32 tokens, a check whose name is longer than any column was"
    table = render_table([Comparison(check, "greedy tokens", detail=detail, agrees=True)])
    row = table.splitlines()[2]
    assert row.startswith(check) and row.endswith(f"ok  {detail}"), table


def test_export_summary_quotes_the_judged_figure() -> None:
    from gpt2_onnx_core.parity import arithmetic_limit, compare_logits

    report = ParityReport()
    rng = np.random.default_rng(0)
    expected = rng.standard_normal((1, 4, 50))
    int4 = tolerance_for("int4")
    report.add(compare_logits("prefill", expected + 0.01, expected, int4.logits_atol, int4.min_top1, int4.max_kl))
    summary = report.summary()
    assert summary.startswith("1 comparison within tolerance (worst KL "), summary
    assert "(max 0.1)" in summary and "max|Δ|" not in summary and "top-1" not in summary
    fp32 = tolerance_for("float32")
    assert fp32.arithmetic is not None
    error, limit = arithmetic_limit(fp32.arithmetic, expected.astype(np.float32), expected)
    report.add(compare_logits("decode", expected, expected, limit, fp32.min_top1, fp32.max_kl, source_error=error))
    assert f"worst max|Δ| 0 (tol {limit:.3g})" in report.summary()


def test_counts_read_as_english(tiny_export: Path) -> None:
    result = invoke("verify", str(tiny_export), "--steps", "1", "--batch-size", "1")
    assert result.exit_code == 0, result.output
    assert "free-running greedy row 0, 1 token " in result.stdout
    assert "1 tokens" not in result.output and "(s)" not in result.output


def test_top1_leaves_out_near_ties_of_the_precision() -> None:
    """A swapped argmax where the reference's top two are within the precision's noise is no disagreement."""
    from gpt2_onnx_core.parity import compare_logits

    expected = np.zeros((1, 3, 5), dtype=np.float32)  # (1, positions, V)
    expected[0, 0, :2] = [1.0, 0.99]  # a near tie: 0.01 apart
    expected[0, 1, :2] = [1.0, 0.0]
    expected[0, 2, :2] = [1.0, 0.0]
    actual = expected.copy()
    actual[0, 0, :2] = [0.99, 1.0]  # the tie swapped
    strict = compare_logits("step", actual, expected, None, min_top1=1.0)
    assert not strict.ok and strict.top1 == pytest.approx(2 / 3) and strict.positions == 3
    lenient = compare_logits("step", actual, expected, None, min_top1=1.0, near_tie=0.05)
    assert lenient.ok and lenient.top1 == 1.0 and lenient.positions == 2 and lenient.near_ties == 1
    assert "1 near tie left out" in lenient.describe()
    ties = compare_logits("step", actual[:, :1], expected[:, :1], None, min_top1=1.0, near_tie=0.05)
    assert ties.ok and ties.top1 is None and "every position a near tie" in ties.describe()


def test_verify_refuses_a_provider_not_here_before_loading_anything(tiny_export: Path) -> None:
    if cuda_works():
        pytest.skip("CUDA works here")
    result = invoke("verify", str(tiny_export), "--provider", "cuda")
    assert result.exit_code == 3 and result.output.count("\n") == 1, result.output  # no stage ran first
    assert result.output.startswith("Error: ") and "CUDA" in result.output
