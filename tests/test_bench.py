"""``gpt2-onnx bench`` on the tiny export: it runs and reports a sane structure. No timing assertions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt2_onnx.app.bench.report import summarize
from gpt2_onnx.app.bench.table import render_table
from gpt2_onnx.app.bench.tasks import RawResults, bench_tasks
from gpt2_onnx_core.bench_protocol import prompt_ids
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from tests.conftest import cuda_works
from tests.helpers import invoke, one_error_line

SMALL = [
    "--repeats", "2", "--warmup", "0", "--new-tokens", "3", "--prompt-lengths", "2,5",
    "--decode-prompt-length", "4", "--batch-size", "2", "--batch-prompt-length", "3",
]  # fmt: skip


def test_bench_json_against_eager(tiny_export: Path) -> None:
    result = invoke("bench", str(tiny_export), *SMALL, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["baseline"] == "pytorch-eager"
    assert set(report["systems"]) == {"pytorch-eager", tiny_export.name}
    for system in report["systems"].values():
        figures = system["figures"]
        for key in (
            "prefill_ms/2",
            "prefill_ms/5",
            "first_token_ms/5",
            "decode_ms_per_token",
            "batch_tokens_per_s",
        ):
            assert figures[key] > 0
        assert figures["decode_ms_per_token_p90"] >= figures["decode_ms_per_token"] * 0.5
        memory = system["memory"]
        assert memory["rss_after_load"] > memory["rss_before_load"] > 0
        assert memory["rss_ready"] >= memory["rss_after_load"] * 0.9  # weights mapped lazily become resident
        assert memory["peak_rss_after_generate"] >= memory["rss_after_load"]
    onnx = report["systems"][tiny_export.name]
    assert onnx["files"]["model_files"] <= onnx["files"]["folder"]
    ratios = report["ratios"][tiny_export.name]
    assert set(ratios) >= {"decode_ms_per_token", "prefill_ms/5", "rss_ready_per_weight_byte"}
    assert 1.0 <= ratios["model_files_per_weight_byte"] < 1.05  # one weights file, no duplicated tensor
    assert report["machine"]["libraries"]["onnx"]


def test_bench_table_without_eager(tiny_export: Path) -> None:
    result = invoke("bench", str(tiny_export), *SMALL, "--no-eager", "--unshared")
    assert result.exit_code == 0, result.output
    assert "decode ms/token (median)" in result.stdout
    assert "pytorch-eager" not in result.stdout
    assert "RSS after load (MiB)" in result.stdout
    assert f"{tiny_export.name}+split" in result.stdout  # --unshared: the two graphs, prepacked per session, beside


def test_bench_decode_contexts_option(tiny_export: Path) -> None:
    """``--decode-contexts`` (in any order) reaches the settings: a figure per length in the JSON."""
    options = ["--decode-contexts", "12,6", "--context-new-tokens", "2"]
    result = invoke("bench", str(tiny_export), *SMALL, "--no-eager", *options, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    settings = report["settings"]
    # the decode prompt's length joins them: each growth divides by a run of as many steps after it
    assert settings["decode_contexts"] == sorted([6, 12, settings["decode_prompt_length"]])
    assert settings["context_new_tokens"] == 2
    figures = report["systems"][tiny_export.name]["figures"]
    assert {"decode_ms_per_token/6", "decode_ms_per_token/12", "decode_growth/6", "decode_growth/12"} <= set(figures)
    assert f"decode_growth/{settings['decode_prompt_length']}" not in figures


def test_bench_reports_a_failing_baseline(tiny_export: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-checkpoint"
    result = invoke("bench", str(tiny_export), *SMALL, "--model", str(missing))
    assert result.exit_code == 2  # a checkpoint that is not there: exit 2, as export says it
    assert "pytorch-eager" in result.output and "does not exist" in result.output
    assert "ModelLoadError" not in result.output


def test_bench_exits_with_the_codes_run_and_verify_give(copy_export: Callable[[], Path], tiny_export: Path) -> None:
    """One mapping for every command: a damaged folder is exit 2 and a provider not here exit 3, each one line
    naming the folder, without a Python class name."""
    folder = copy_export()
    weights = folder / "model.onnx.data"
    weights.write_bytes(weights.read_bytes()[:1000])
    damaged = invoke("bench", str(folder), *SMALL, "--no-eager")
    assert damaged.exit_code == 2, damaged.output
    line = one_error_line(damaged.output)
    assert folder.name in line and "Error:" in line and "ManifestError" not in line
    if cuda_works():
        return
    no_cuda = invoke("bench", str(tiny_export), *SMALL, "--no-eager", "--provider", "cuda")
    assert no_cuda.exit_code == 3, no_cuda.output
    assert "ProviderUnavailableError" not in one_error_line(no_cuda.output)


def test_bench_refuses_sequences_beyond_the_model(tiny_export: Path) -> None:
    result = invoke("bench", str(tiny_export), "--prompt-lengths", "500", "--no-eager")
    assert result.exit_code == 2
    assert "positions" in result.output


def test_onnx_worker_never_imports_torch() -> None:
    code = "import sys, gpt2_onnx.app.bench.worker, gpt2_onnx_runtimes.bench_system; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_settings_validation() -> None:
    with pytest.raises(InvalidInputError):
        BenchSettings(threads=0)
    with pytest.raises(InvalidInputError):
        BenchSettings(prompt_lengths=())
    assert BenchSettings.from_json(BenchSettings().to_json()) == BenchSettings()


def test_new_runs_add_the_growth_base() -> None:
    """A new run with decode contexts also decodes after the decode prompt, in a run as long; none asked: none
    added; a length below 1 left for BenchSettings to refuse by the user's own list."""
    from gpt2_onnx_core.bench_settings import with_growth_base

    assert with_growth_base((1000, 512), 128) == (1000, 512, 128)
    assert with_growth_base((128, 1000), 128) == (128, 1000, 128)
    assert BenchSettings(decode_contexts=with_growth_base((1000,), 128)).growth_over_context_run
    assert with_growth_base((), 128) == ()
    assert with_growth_base((0, 8), 128) == (0, 8)


def test_decode_contexts_settings() -> None:
    """Stored sorted and once each, counted in the longest sequence, kept by JSON; JSON without them still loads."""
    settings = BenchSettings(decode_contexts=(1000, 512, 512), context_new_tokens=16)
    assert settings.decode_contexts == (512, 1000)
    assert settings.longest_sequence() == 1016
    assert BenchSettings(decode_contexts=(8,)).longest_sequence() == BenchSettings().longest_sequence() == 192
    data = json.loads(json.dumps(settings.to_json()))
    assert data["decode_contexts"] == [512, 1000]
    assert BenchSettings.from_json(data) == settings
    older = {k: v for k, v in BenchSettings().to_json().items() if k not in {"decode_contexts", "context_new_tokens"}}
    assert BenchSettings.from_json(older) == BenchSettings()
    with pytest.raises(OptionError, match="decode_contexts must be >= 1, got 0, 512"):
        BenchSettings(decode_contexts=(0, 512))
    with pytest.raises(OptionError, match="context_new_tokens must be >= 2"):
        BenchSettings(decode_contexts=(512,), context_new_tokens=1)


def _raw(label: str, kind: str, scale: float, settings: BenchSettings) -> RawResults:
    """Synthetic answers: every duration is ``scale`` times the baseline's; the second round twice as slow."""
    raw = RawResults(SystemSpec(kind, label, folder="f" if kind == "onnx" else None))  # type: ignore[arg-type]
    memory = {"rss": 100, "peak_rss": 120}
    raw.load = {
        "load_s": 1.0,
        "before": memory,
        "after": {"rss": 300, "peak_rss": 320},
        "ready": {"rss": 310, "peak_rss": 320},
    }
    raw.end_memory = {"rss": 310, "peak_rss": 330}
    if kind == "onnx":
        raw.load["files"] = {"model_files": 101, "folder": 150, "weight_bytes": 100}
    for task in bench_tasks(settings, vocab_size=50):
        for slow in (1.0, 2.0):
            s = scale * slow
            answer = {"s": s, "first_token_s": s, "step_s": [s, 2 * s, 3 * s], "total_s": s}
            raw.tasks.setdefault(task.name, []).append(answer)
    return raw


def test_paired_ratios() -> None:
    settings = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0)
    raws = [_raw("eager", "eager", 0.010, settings), _raw("ours", "onnx", 0.005, settings)]
    report = summarize(raws, settings, {"cpu": "test"}, parameter_bytes=100)
    for ratios in (report.ratios["ours"], report.paired_ratios["ours"]):
        assert ratios["prefill_ms/4"] == pytest.approx(0.5)
        assert ratios["decode_ms_per_token"] == pytest.approx(0.5)
        assert ratios["batch_tokens_per_s"] == pytest.approx(2.0)  # higher is better: twice the tokens per second
    assert report.ratios["ours"]["model_files_per_weight_byte"] == pytest.approx(1.01)
    eager = report.systems["eager"]["figures"]
    assert eager["decode_ms_per_token"] == pytest.approx(30.0)  # median of the rounds' step medians (20, 40)
    assert "ours ratio" in render_table(report)


def test_first_token_overhead_row() -> None:
    settings = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0)
    raws = [_raw("eager", "eager", 0.010, settings), _raw("ours", "onnx", 0.005, settings)]
    for answer in raws[1].tasks["first_token/4"]:
        answer["first_token_s"] = answer["first_token_s"] + 0.002  # 2 ms above the graph's prefill
    report = summarize(raws, settings, {"cpu": "test"}, parameter_bytes=100)
    assert report.systems["ours"]["figures"]["first_token_overhead_ms/4"] == pytest.approx(2.0)
    assert report.systems["eager"]["figures"]["first_token_overhead_ms/4"] == pytest.approx(0.0)
    row = next(line for line in render_table(report).splitlines() if "time to first token − graph prefill, 4" in line)
    assert "2.0" in row


def _table_row(table: str, label: str) -> list[str]:
    [line] = [line for line in table.splitlines() if line.startswith(label)]
    return line[len(label) :].split()


def _set_rounds(raw: RawResults, seconds: list[float]) -> RawResults:
    """Every task of ``raw`` answered with these per-round durations."""
    for task in raw.tasks:
        raw.tasks[task] = [{"s": v, "first_token_s": v, "step_s": [v, v], "total_s": v} for v in seconds]
    return raw


def test_every_ratio_cell_agrees_with_the_figures_beside_it() -> None:
    """Rounds whose ratios differ: the median of per-round ratios (0.5) disagrees with the medians printed (12 vs
    20 ms); the table shows the ratio of the medians (0.60), the JSON both."""
    settings = BenchSettings(prompt_lengths=(4,), repeats=3, settle_s=0)
    eager = _set_rounds(_raw("eager", "eager", 1.0, settings), [0.010, 0.020, 0.030])
    ours = _set_rounds(_raw("ours", "onnx", 1.0, settings), [0.005, 0.040, 0.012])
    report = summarize([eager, ours], settings, {"cpu": "test"}, parameter_bytes=100)
    table = render_table(report)
    better, base, mine, ratio = _table_row(table, "prefill 4 tokens after decode (ms)")
    assert (better, base, mine, ratio) == ("lower", "20.0", "12.0", "0.60×")
    assert report.paired_ratios["ours"]["prefill_ms/4"] == pytest.approx(0.5)  # JSON only, named so
    better, base, mine, ratio = _table_row(table, "tokens/s, batch 4")
    shown = float(mine.replace(",", "")) / float(base.replace(",", ""))
    assert better == "higher" and float(ratio.rstrip("×")) == pytest.approx(shown, abs=0.006)
    assert _table_row(table, "decode ms/token (median)")[0] == "lower"
    assert "the ratio of the medians shown" in table.splitlines()[-1]


def test_decode_contexts_are_tasks_figures_and_rows() -> None:
    """``decode/C`` runs come after the usual tasks (which keep their order), on the seeded prompt of C tokens; each
    becomes a decode figure like the decode run's, with ratios, and a growth over the system's own decode run."""
    settings = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0, decode_contexts=(1000, 512))
    tasks = bench_tasks(settings, vocab_size=50)
    names = [task.name for task in tasks]
    assert names[-2:] == ["decode/512", "decode/1000"]
    assert names[:-2] == [task.name for task in bench_tasks(BenchSettings(prompt_lengths=(4,)), vocab_size=50)]
    longest = tasks[-1]
    assert (longest.command, longest.new_tokens, longest.before_ids) == ("generate", 16, None)
    assert longest.ids == prompt_ids(settings.seed, 1, 1000, 50).tolist()  # (1, 1000)

    raws = [_raw("eager", "eager", 0.010, settings), _raw("ours", "onnx", 0.005, settings)]
    for raw in raws:
        for answer, times in zip(raw.tasks["decode/1000"], (3, 5), strict=True):  # 3×, then 5× the decode steps
            answer["step_s"] = [times * s for s in answer["step_s"]]
    report = summarize(raws, settings, {"cpu": "test"}, parameter_bytes=100)
    eager = report.systems["eager"]["figures"]
    assert eager["decode_ms_per_token"] == pytest.approx(30.0)  # rounds 20, 40
    assert eager["decode_ms_per_token/512"] == pytest.approx(30.0)
    assert eager["decode_ms_per_token/1000"] == pytest.approx(130.0)  # rounds 60, 200
    assert eager["decode_ms_per_token_p90/1000"] > eager["decode_ms_per_token/1000"]
    assert eager["decode_growth/1000"] == pytest.approx(130.0 / 30.0)  # the two medians
    assert eager["decode_growth_paired/1000"] == pytest.approx(4.0)  # rounds 3 and 5
    assert eager["decode_growth/512"] == pytest.approx(1.0)
    for ratios in (report.ratios["ours"], report.paired_ratios["ours"]):
        assert ratios["decode_ms_per_token/1000"] == pytest.approx(0.5)
    assert json.loads(json.dumps(report.to_json()))["settings"]["decode_contexts"] == [512, 1000]

    table = render_table(report)
    assert _table_row(table, "decode ms/token after 1000 tokens (median)") == ["lower", "130.0", "65.0", "0.50×"]
    assert _table_row(table, "decode ms/token after 1000 ÷ after 128 tokens") == ["lower", "4.33×", "4.33×"]
    assert _table_row(table, "decode ms/token after 512 ÷ after 128 tokens") == ["lower", "1.00×", "1.00×"]
    plain = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0)
    default = summarize([_raw("eager", "eager", 0.01, plain)], plain, {}, parameter_bytes=100)
    assert "after 1000" not in render_table(default)  # no contexts asked for: the table as before
    assert not any("/" in key for key in default.systems["eager"]["figures"] if key.startswith("decode"))


def test_growth_is_over_the_run_of_as_many_steps_when_the_decode_prompt_is_a_context() -> None:
    """``--decode-contexts 128,1000`` with the decode prompt of 128: the growth after 1,000 is over the 16-step
    run after 128, not over the 64-step decode run, and the table's row says so."""
    settings = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0, decode_contexts=(128, 1000))
    raws = [_raw("eager", "eager", 0.010, settings)]
    for task, times in (("decode/128", 2), ("decode/1000", 3)):
        for answer in raws[0].tasks[task]:
            answer["step_s"] = [times * s for s in answer["step_s"]]
    report = summarize(raws, settings, {"cpu": "test"}, parameter_bytes=100)
    eager = report.systems["eager"]["figures"]
    assert eager["decode_growth/1000"] == pytest.approx(1.5)  # 3× over 2× the decode run's steps
    assert eager["decode_growth_paired/1000"] == pytest.approx(1.5)
    assert "decode_growth/128" not in eager
    row = "decode ms/token after 1000 ÷ after 128 tokens, 16 new tokens each"
    assert _table_row(render_table(report), row) == ["lower", "1.50×"]


def test_memory_ratios_are_over_each_systems_own_weights() -> None:
    """An int4 column divided by its own weights, and the table says so: a row shows those weights."""
    settings = BenchSettings(prompt_lengths=(4,), repeats=2, settle_s=0)
    quantized = _raw("int4", "onnx", 0.005, settings)
    quantized.load["files"] = {"model_files": 30, "folder": 40, "weight_bytes": 25}
    report = summarize([_raw("eager", "eager", 0.01, settings), quantized], settings, {}, parameter_bytes=100)
    assert report.ratios["int4"]["rss_ready_per_weight_byte"] == pytest.approx(310 / 25)
    table = render_table(report)
    assert "weight bytes (MiB)" in table and "× the system's own weight bytes" in table.splitlines()[-1]
    assert _table_row(table, "RSS ready: both graphs run once (MiB)")[-1] == f"{310 / 25:.2f}×"


_FAKE_SYSTEM = '''
import numpy as np
from gpt2_onnx_core.bench_protocol import GenerationTiming


class FakeSystem:
    """A system from outside the package: fixed timings, no model."""

    def __init__(self, spec, settings):
        self.label = spec.label
        self.decoded = False

    def load(self):
        pass

    def prefill(self, input_ids):
        after_decode, self.decoded = self.decoded, False
        return 0.002 if after_decode else 0.001  # tells the test whether decode steps came right before

    def generate(self, input_ids, new_tokens):
        self.decoded = new_tokens > 1
        return GenerationTiming(0.002, [0.003] * (new_tokens - 1), 0.002 + 0.003 * (new_tokens - 1))
'''


def test_worker_builds_a_factory_system_in_another_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``factory`` and ``python``: a peer runtime in its own virtual environment speaks the same protocol."""
    from gpt2_onnx.app.bench.runner import run_systems

    (tmp_path / "fake_bench_system.py").write_text(_FAKE_SYSTEM, encoding="utf-8")
    marker = tmp_path / "interpreter-used"
    interpreter = tmp_path / "python"
    interpreter.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    interpreter.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    settings = BenchSettings(
        prompt_lengths=(3,), new_tokens=3, batch_size=1, batch_prompt_length=2, repeats=2, settle_s=0
    )
    spec = SystemSpec("onnx", "peer", factory="fake_bench_system:FakeSystem", python=str(interpreter))
    (raw,) = run_systems([spec], settings, vocab_size=50)
    assert marker.exists()
    assert [answer["s"] for answer in raw.tasks["prefill/3"]] == [0.002, 0.002]  # each right after decode steps
    assert raw.tasks["decode"][0]["step_s"] == [0.003, 0.003]
    assert raw.end_memory["rss"] > 0


def test_weight_pass_floor_computes_every_product(tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/weight_pass_floor.py's passes: the ONNX graph holds every block matrix and the tied head and
    computes their products; both systems time prefill and decode passes."""
    import numpy as np
    import onnxruntime as ort

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    from benchmarks.weight_pass_system import OrtWeightPass, TorchWeightPass, block_matrices, weight_pass_graph

    spec = SystemSpec("onnx", "pass", model=str(tiny_checkpoint), seed=0)
    matrices, embedding = block_matrices(spec)
    model = weight_pass_graph(matrices, embedding)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    d = embedding.shape[1]
    feeds = {f"x_{w}": rng.standard_normal((3, w), dtype=np.float32) for w in sorted({m.shape[0] for m in matrices})}
    feeds["x_head"] = rng.standard_normal((2, d), dtype=np.float32)
    *products, logits = session.run(None, feeds)
    n_layer = json.loads((tiny_checkpoint / "config.json").read_text())["n_layer"]
    assert len(products) == len(matrices) == 4 * n_layer  # c_attn, attn.c_proj, c_fc, mlp.c_proj per block
    for matrix, product in zip(matrices, products, strict=True):
        np.testing.assert_allclose(product, feeds[f"x_{matrix.shape[0]}"] @ matrix, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(logits, feeds["x_head"] @ embedding.T, rtol=1e-4, atol=1e-4)

    settings = BenchSettings(threads=1)
    ids = np.zeros((2, 5), dtype=np.int64)  # (B, T)
    for system in (
        TorchWeightPass(spec, settings),
        OrtWeightPass(spec, settings),
        OrtWeightPass(SystemSpec("onnx", "pass", model=str(tiny_checkpoint), share_weights=False), settings),
    ):
        system.load()
        assert system.prefill(ids) > 0
        timing = system.generate(ids, 4)
        assert len(timing.step_s) == 3 and min(timing.step_s) > 0
        assert timing.total_s >= timing.first_token_s + sum(timing.step_s) * 0.99


def _fake_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SystemSpec:
    (tmp_path / "fake_bench_system.py").write_text(_FAKE_SYSTEM, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return SystemSpec("onnx", "peer", factory="fake_bench_system:FakeSystem")


def test_prefills_follow_decode_steps_unless_asked_not_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt2_onnx.app.bench.runner import run_systems

    spec = _fake_system(tmp_path, monkeypatch)
    base = {"new_tokens": 3, "batch_size": 1, "batch_prompt_length": 2, "repeats": 1, "warmup": 0, "settle_s": 0}
    (after,) = run_systems([spec], BenchSettings(prompt_lengths=(3, 4), **base), vocab_size=50)
    assert [after.tasks[f"prefill/{n}"][0]["s"] for n in (3, 4)] == [0.002, 0.002]
    settings = BenchSettings(prompt_lengths=(3, 4), decode_steps_before_prefill=0, **base)
    (back_to_back,) = run_systems([spec], settings, vocab_size=50)
    assert back_to_back.tasks["prefill/4"][0]["s"] == 0.001  # right after prefill/3


def test_progress_estimates_the_time_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt2_onnx.app.bench.runner import duration_text, run_systems

    spec = _fake_system(tmp_path, monkeypatch)
    settings = BenchSettings(
        prompt_lengths=(3,), new_tokens=3, batch_size=1, batch_prompt_length=2, repeats=2, settle_s=0
    )
    messages: list[str] = []
    run_systems([spec], settings, vocab_size=50, progress=messages.append)
    rounds = [m for m in messages if m.startswith("round ")]
    assert rounds[0] == "round 1/3 (warm-up), time left known after this round"
    assert rounds[1].startswith("round 2/3, about ") and rounds[1].endswith(" left")
    assert (duration_text(42.4), duration_text(185)) == ("42 s", "3 min 05 s")


def test_bench_table_states_the_direction_of_every_row(tiny_export: Path) -> None:
    result = invoke("bench", str(tiny_export), *SMALL, "--no-eager")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if " better " in f" {line} ")
    assert header.split()[0] == "better"
    timed = [line for line in lines if "(ms)" in line or "tokens/s" in line or "ms/token" in line]
    assert timed and all((" lower " in line) or (" higher " in line) for line in timed)
    assert "round 1/2, time left known after this round" in result.stderr
    assert "round 2/2, about " in result.stderr


@pytest.mark.parametrize(("field", "value"), [("kv_cache", "int4"), ("layout", "both")])
def test_a_system_spec_refuses_an_unknown_cache_or_layout_when_made(field: str, value: str) -> None:
    with pytest.raises(OptionError, match=f"must be one of .*got '{value}'"):
        SystemSpec("onnx", "x", folder="f", **{field: value})  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=f"got '{value}'"):
        SystemSpec.from_json({"kind": "onnx", "label": "x", field: value})
