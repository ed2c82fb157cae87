"""benchmarks/peers_*.py's pure parts: the systems given on the command line, token agreement, the figures read
from the bench's rounds and the table. No peer runtime is needed (their venvs are built by peers_install.sh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpt2_onnx.app.bench.tasks import RawResults, bench_tasks
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _benchmarks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))


def test_agreement_names_the_first_split() -> None:
    from benchmarks.peers_report import agreement, first_split

    assert agreement([1, 2, 3], [1, 2, 3]) == "identical"
    assert agreement([1, 5, 3], [1, 2, 3]) == "splits at step 1"
    assert agreement([9, 2, 3], [1, 2, 3]) == "splits at step 0"
    assert first_split([1, 2], [1, 2, 3]) == 2  # a run that stopped early leaves the reference where it ends
    assert first_split([1, 2, 3], [1, 2, 3]) is None


def test_ours_options_are_system_spec_fields() -> None:
    from benchmarks.peers_report import ours_spec, peer_spec

    spec = ours_spec(["gpt2-onnx fp32 prepacked", "out/fp32", "share_weights=false"])
    assert spec == SystemSpec("onnx", "gpt2-onnx fp32 prepacked", folder="out/fp32", share_weights=False)
    assert ours_spec(["fp32", "out/fp32"]).share_weights is True
    assert ours_spec(["fp32", "out/fp32", "seed=3"]).seed == 3
    with pytest.raises(ValueError, match="not a SystemSpec option"):
        ours_spec(["fp32", "out/fp32", "warp=9"])
    with pytest.raises(ValueError, match="expected true or false"):
        ours_spec(["fp32", "out/fp32", "share_weights=maybe"])
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        ours_spec(["fp32", "out/fp32", "share_weights"])
    with pytest.raises(ValueError, match="not a SystemSpec option"):  # set by the position, not as an option
        ours_spec(["fp32", "out/fp32", "python=/usr/bin/python3"])
    int8_cache = ours_spec(["int4", "out/int4", "layout=merged", "kv_cache=int8"])
    assert (int8_cache.layout, int8_cache.kv_cache) == ("merged", "int8")
    assert SystemSpec.from_json(int8_cache.to_json()) == int8_cache

    peer = peer_spec(["llama.cpp f32", "benchmarks.llama_cpp_system:LlamaCppSystem", "/venv/bin/python", "f32.gguf"])
    assert (peer.kind, peer.factory, peer.python, peer.folder) == (
        "onnx",
        "benchmarks.llama_cpp_system:LlamaCppSystem",
        "/venv/bin/python",
        "f32.gguf",
    )
    with pytest.raises(ValueError, match="module:callable"):
        peer_spec(["x", "no_colon", "/venv/bin/python", "f"])


def test_settings_put_a_decode_before_the_measured_prefill() -> None:
    """The prefill figure is the "batch" task's first token: it must come right after "decode" in each round, on the
    same prompt at batch 1."""
    from benchmarks.peers_report import peers_settings

    settings = peers_settings(threads=2, repeats=3)
    tasks = bench_tasks(settings, vocab_size=50257)
    names = [task.name for task in tasks]
    assert names.index("batch") == names.index("decode") + 1
    decode, batch = tasks[names.index("decode")], tasks[names.index("batch")]
    assert batch.ids == decode.ids and len(batch.ids) == 1 and len(batch.ids[0]) == 128
    assert batch.new_tokens == decode.new_tokens == 64


def _raw(label: str, kind: str, scale: float, contexts: tuple[int, ...] = ()) -> RawResults:
    """Synthetic rounds: every time ``scale`` × the baseline's, the second round twice as slow as the first; a
    decode after a longer prompt (``contexts``) 3× as slow per token as the decode run in the first round, 5× in the
    second."""
    from benchmarks.peers_report import peers_settings

    raw = RawResults(SystemSpec(kind, label, folder="f"))  # type: ignore[arg-type]
    raw.load = {"load_s": 1.0, "files": {"model_files": 2_000_000, "folder": 2_100_000}}
    raw.end_memory = {"rss": 90 * 2**20, "peak_rss": 100 * 2**20}
    for task in bench_tasks(peers_settings(threads=2, repeats=2, decode_contexts=contexts), vocab_size=50):
        for slow, longer in ((1.0, 3.0), (2.0, 5.0)):
            s = scale * slow
            first = (5 if task.name == "batch" else 1) * s  # the prefill after a decode: 5 s
            steps = 6 * s * (longer if task.name.startswith("decode/") else 1)
            answer = {"s": s, "first_token_s": first, "step_s": [s, s, steps - 2 * s], "total_s": first + steps}
            raw.tasks.setdefault(task.name, []).append(answer)
    return raw


def test_figures_are_paired_per_round() -> None:
    from benchmarks.peers_report import figures

    found = figures([_raw("pytorch-eager", "eager", 0.010), _raw("peer", "onnx", 0.005)], "pytorch-eager")
    eager, peer = found["pytorch-eager"], found["peer"]
    assert eager["rounds"]["prefill_ms"] == pytest.approx([50.0, 100.0])  # the batch task's first token
    assert eager["rounds"]["decode_ms_per_token"] == pytest.approx([20.0, 40.0])  # (last − first) / (n − 1)
    assert eager["rounds"]["first_token_ms"] == pytest.approx([10.0, 20.0])
    assert peer["median"]["decode_ms_per_token"] == pytest.approx(15.0)
    assert peer["ratio"]["prefill_ms"] == pytest.approx(0.5)
    assert peer["ratio_rounds"]["decode_ms_per_token"] == pytest.approx([0.5, 0.5])


def _report() -> dict[str, Any]:
    from benchmarks.peers_report import figures

    raws = [_raw("pytorch-eager", "eager", 0.010), _raw("peer", "onnx", 0.005)]
    systems = {
        raw.spec.label: {"memory": {"peak_rss_after_generate": raw.end_memory["peak_rss"]}, "files": raw.load["files"]}
        for raw in raws
    }
    return {
        "baseline": "pytorch-eager",
        "peers": figures(raws, "pytorch-eager"),
        "systems": systems,
        "greedy": {
            "agreement": {"pytorch-eager": "identical", "peer": "splits at step 7"},
            "info": {
                "OpenVINO x": {"cpu_defaults": {"INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "u8"}},
                "CTranslate2 int8": {"compute_type": "int8_float32"},
            },
        },
        "settings": {
            "repeats": 2,
            "warmup": 1,
            "threads": 2,
            "decode_prompt_length": 128,
            "new_tokens": 64,
            "attention": "sdpa",
        },
        "machine": {
            "cpu": "Test CPU",
            "cpu_count": 2,
            "memory_bytes": 24 * 2**30,
            "platform": "Linux",
            "load_average": [0.1, 0.1, 0.1],
        },
        "cpu_flags": {"avx512_vnni": True, "amx_int8": False},
        "venvs": {"openvino-venv": {"python": "/v/bin/python", "versions": {"openvino": "2026.4.1"}}},
    }


def test_table_rows_and_context() -> None:
    from benchmarks.peers_table import context, rows

    lines = rows(_report())
    assert len(lines) == 4  # header, rule, two systems
    assert lines[2].startswith("| pytorch-eager | 75.0 | 30.0 | — | 100 | 2.0 | reference |")
    assert lines[3] == "| peer | 37.5 (0.50×) | 15.0 (0.50×) | 0.50–0.50 / 0.50–0.50 | 100 | 2.0 | splits at step 7 |"
    text = context(_report())
    assert "present: avx512_vnni; absent: amx_int8" in text
    assert "openvino-venv venv: openvino 2026.4.1" in text
    assert "bf16 compute, u8 KV cache" in text and "CTranslate2 int8 int8_float32" in text
    assert "busy" not in text
    quiet, busy = _report(), _report()
    quiet["other_work"] = {"wall_s": 100.0, "other_cores": 0.05, "steal_cores": 0.0}
    busy["other_work"] = {"wall_s": 100.0, "other_cores": 0.8, "steal_cores": 0.0}
    assert "kept 0.05 of the 2 cores busy" in context(quiet) and "**The machine was busy**" not in context(quiet)
    assert "**The machine was busy**" in context(busy)


def test_decode_contexts_come_after_the_usual_tasks() -> None:
    from benchmarks.peers_report import parse_lengths, peers_settings

    settings = peers_settings(threads=2, repeats=3, decode_contexts=parse_lengths("1000,512"))
    names = [task.name for task in bench_tasks(settings, vocab_size=50257)]
    assert names == [
        *(t.name for t in bench_tasks(peers_settings(2, 3), vocab_size=50257)),
        "decode/128",  # the run of as many steps that each growth divides by
        "decode/512",
        "decode/1000",
    ]
    assert settings.longest_sequence() == 1016 and settings.growth_contexts == (512, 1000)
    assert parse_lengths(" 512, 1000 ") == (512, 1000) and parse_lengths("") == ()
    with pytest.raises(ValueError, match="comma-separated token counts"):
        parse_lengths("512,many")
    with pytest.raises(ValueError, match=">= 1"):
        parse_lengths("0")


def test_side_by_side_takes_decode_contexts(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.peers_side_by_side import parse

    common = ["--checkpoint", "ckpt", "--ours", "fp32", "out/fp32", "--out", "r.json"]
    assert parse(common).decode_contexts == ()
    assert parse([*common, "--decode-contexts", "512,1000"]).decode_contexts == (512, 1000)
    with pytest.raises(SystemExit) as exit_info:
        parse([*common, "--decode-contexts", "512,x"])
    assert exit_info.value.code == 2
    assert "--decode-contexts: expected comma-separated token counts" in capsys.readouterr().err


def test_side_by_side_takes_the_tokens_after_each_long_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    """--context-new-tokens sizes the decode runs after --decode-contexts' prompts (16 unless given): 24 after
    1,000 tokens fills GPT-2's 1,024 positions."""
    from benchmarks.peers_side_by_side import parse

    common = ["--checkpoint", "ckpt", "--ours", "fp32", "out/fp32", "--out", "r.json", "--decode-contexts", "1000"]
    assert parse(common).context_new_tokens == 16
    settings = parse([*common, "--context-new-tokens", "24"]).settings
    assert settings.context_new_tokens == 24 and settings.longest_sequence() == 1024
    tasks = {task.name: task for task in bench_tasks(settings, vocab_size=50257)}
    assert tasks["decode/1000"].new_tokens == 24 and tasks["decode"].new_tokens == 64
    with pytest.raises(SystemExit) as exit_info:
        parse([*common, "--context-new-tokens", "1"])
    assert exit_info.value.code == 2
    assert "--context-new-tokens must be >= 2" in capsys.readouterr().err


def test_decode_context_figures_are_paired_per_round() -> None:
    from benchmarks.peers_report import figures

    raws = [_raw("pytorch-eager", "eager", 0.010, (512, 1000)), _raw("peer", "onnx", 0.005, (512, 1000))]
    found = figures(raws, "pytorch-eager", BenchSettings(decode_contexts=(512, 1000)))
    eager, peer = found["pytorch-eager"], found["peer"]
    assert eager["rounds"]["decode_ms_per_token"] == pytest.approx([20.0, 40.0])
    assert eager["rounds"]["decode_ms_per_token/1000"] == pytest.approx([60.0, 200.0])  # 3×, then 5×
    assert peer["ratio_rounds"]["decode_ms_per_token/1000"] == pytest.approx([0.5, 0.5])
    assert eager["rounds"]["decode_growth/1000"] == pytest.approx([3.0, 5.0])  # per round, on the same system
    assert eager["median"]["decode_growth/1000"] == pytest.approx(4.0)
    assert "decode_growth/1000" not in eager["ratio"]
    assert set(figures(raws, "pytorch-eager")["peer"]["median"]) == {
        "prefill_ms",
        "decode_ms_per_token",
        "first_token_ms",
        "prefill_back_to_back_ms",
    }  # without contexts: the figures as before


def test_context_table_only_when_the_run_has_contexts() -> None:
    from benchmarks.peers_report import figures
    from benchmarks.peers_table import context_rows, rows

    report = _report()
    assert context_rows(report) == []  # a JSON from before decode_contexts existed
    report["settings"]["decode_contexts"] = []
    assert context_rows(report) == []
    raws = [_raw("pytorch-eager", "eager", 0.010, (512, 1000)), _raw("peer", "onnx", 0.005, (512, 1000))]
    report["peers"] = figures(raws, "pytorch-eager", BenchSettings(decode_contexts=(512, 1000)))
    report["settings"].update(decode_contexts=[512, 1000], context_new_tokens=16)
    assert rows(report) == rows(_report())  # the first table unchanged
    lines = context_rows(report)
    assert lines[0] == (
        "| system | decode ms/token after 128 tokens (× eager) | after 512 tokens (× eager) | "
        "after 1,000 tokens (× eager) | after 1,000 ÷ after 128, per round |"
    )
    assert lines[1] == "|---|---|---|---|---|"
    assert lines[2] == "| pytorch-eager | 30.0 | 130.0 | 130.0 | 4.00× (3.00–5.00) |"
    assert lines[3] == "| peer | 15.0 (0.50×) | 65.0 (0.50×) | 65.0 (0.50×) | 4.00× (3.00–5.00) |"
    assert lines[4] == "" and "of 512, 1,000 tokens (16 tokens each)" in lines[5]


def test_tables_pair_the_systems_per_round() -> None:
    from benchmarks.peers_report import figures
    from benchmarks.peers_table import context_rows, rows

    report = _report()
    raws = [_raw("pytorch-eager", "eager", 0.010, (1000,)), _raw("peer", "onnx", 0.005, (1000,))]
    report["peers"] = figures(raws, "pytorch-eager", BenchSettings(decode_contexts=(1000,)))
    report["settings"].update(decode_contexts=[1000], context_new_tokens=16)
    report["peers"]["peer"]["rounds"]["decode_growth/1000"] = [2.4, 6.0]  # eager's: 3.0, 5.0
    lines = context_rows(report, ("pytorch-eager",))
    assert lines[0].endswith("| ÷ pytorch-eager's, per round: median (rounds ≤ 1) |")
    assert lines[1] == "|---" * 5 + "|"
    assert lines[2].endswith("| 1.000 (2/2) |")  # itself
    assert lines[3].endswith("| 1.000 (1/2) |")  # 0.8 and 1.2: the median 1.0, one round no larger
    with pytest.raises(KeyError, match="no system labelled 'absent'"):
        context_rows(report, ("absent",))
    first = rows(report, ("pytorch-eager",))
    assert first[0].endswith("| prefill / decode ÷ pytorch-eager's, per round: median (rounds ≤ 1) |")
    assert first[1] == "|---" * 8 + "|"
    assert first[2].endswith("| 1.000 (2/2) / 1.000 (2/2) |")
    assert first[3].endswith("| 0.500 (2/2) / 0.500 (2/2) |")  # half eager's times in both rounds


def test_llama_cpp_context_holds_the_longest_sequence() -> None:
    from benchmarks.peer_common import context_positions

    assert context_positions(192, trained=1024) == 512  # the default side-by-side: as before
    assert context_positions(1016, trained=1024) == 1024  # 1,000 + 16
    assert context_positions(600, trained=1024) == 768
    assert context_positions(600, trained=0) == 768  # the model's positions unknown
    assert context_positions(100, trained=256) == 256  # never past the model's own
    with pytest.raises(ValueError, match="needs 1100 positions, the model holds 1024"):
        context_positions(1100, trained=1024)


def test_other_work_subtracts_our_own_cpu(tmp_path: Path) -> None:
    from benchmarks.peers_report import cpu_seconds, other_work

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 50 0 25 500 0 0 0 0 0 0\n", encoding="utf-8")
    found = cpu_seconds(stat)
    assert set(found) == {"ours", "busy", "steal"} and found["ours"] > 0
    before = {"busy": 10.0, "steal": 0.0, "ours": 5.0}
    after = {"busy": 110.0, "steal": 2.0, "ours": 85.0}  # 100 s busy in 100 s, 80 s of them ours
    assert other_work(before, after, 100.0) == {"wall_s": 100.0, "other_cores": 0.2, "steal_cores": 0.02}
    assert other_work({"ours": 0.0}, {"ours": 1.0}, 10.0) is None


def test_cpu_flags(tmp_path: Path) -> None:
    from benchmarks.peers_report import cpu_flags

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n", encoding="utf-8")
    flags = cpu_flags(cpuinfo)
    assert flags["avx512_vnni"] and flags["avx2"] and not flags["amx_tile"]
    assert cpu_flags(tmp_path / "absent") == {}


def test_cpu_line_tells_apart_two_cpus_of_one_name(tmp_path: Path) -> None:
    from benchmarks.peers_report import cpu_line

    avx2, avx512 = tmp_path / "avx2", tmp_path / "avx512"
    avx2.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx2\n", encoding="utf-8")
    avx512.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_vnni\n", encoding="utf-8")
    assert cpu_line(avx2).startswith("AMD EPYC (has avx2; lacks avx512f, avx512_vnni")
    assert cpu_line(avx512).startswith("AMD EPYC (has avx2, avx512f, avx512_vnni; lacks avx_vnni")


def test_serve_peers_pairs_take_serve_options() -> None:
    from benchmarks.serve_peers import serve_options

    assert serve_options(["kv-cache=int8", "max-batch=8"]) == ["--kv-cache", "int8", "--max-batch", "8"]
    assert serve_options([]) == []
    with pytest.raises(SystemExit, match="OPTION=VALUE"):
        serve_options(["kv-cache"])


def test_serve_options_pairs_each_repeat_with_the_first_option_set() -> None:
    """The ratio is per repeat (mean tokens/s ÷ the first set's in the same repeat), then the median over repeats;
    the median tokens/s is over every round."""
    from benchmarks.serve_options import summary, table

    found = {"a": [[100.0, 100.0], [200.0, 200.0], [100.0, 100.0]], "b": [[110.0, 90.0], [220.0, 260.0], [90.0, 90.0]]}
    first, second = summary(found)
    assert (first["ratio_to_first"], first["repeats_higher"]) == (1.0, 0)
    assert (second["ratio_to_first"], second["repeats_higher"]) == (1.0, 1)  # ratios 1.0, 1.2, 0.9
    assert second["tokens_per_s"] == 100.0  # the median of its six rounds
    machine = {"cpu": "CPU", "cpus": 2, "platform": "p", "load_before": [0.1], "load_after": [0.2], "onnxruntime": "1"}
    settings = {"clients": 16, "requests": 48, "rounds": 2, "repeats": 3, "max_tokens": 32}
    results = {"export": "e", "options": {"a": "", "b": "--x"}, "settings": settings, "machine": machine}
    text = table(results | {"variants": [first, second]})
    assert "| e | a: `(none)` | 100.0 | 100, 100; 200, 200; 100, 100 | 1.000 (0/3) |" in text
    assert "| e | b: `--x` | 100.0 | 110, 90; 220, 260; 90, 90 | 1.000 (1/3) |" in text


def test_llama_server_takes_another_port_when_its_own_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import serve_peers

    server = serve_peers.LlamaServer(Path("llama-server"), Path("m.gguf"), tmp_path, slots=2, threads=1)
    tried: list[int] = []
    taken = 1

    def start() -> serve_peers.LlamaServer:
        tried.append(server.port)
        if len(tried) <= taken:
            raise serve_peers.PortTaken(server.port)
        return server

    monkeypatch.setattr(server, "_start", start)
    assert server.start() is server
    assert len(tried) == 2 and server.command[server.command.index("--port") + 1] == str(server.port)
    assert server.url == f"http://127.0.0.1:{server.port}"
    tried.clear()
    taken = serve_peers.PORT_TRIES
    with pytest.raises(serve_peers.PortTaken):  # every port tried was taken: the last one's error
        server.start()
    assert len(tried) == serve_peers.PORT_TRIES


def test_run_clients_answers_in_request_order_and_reports_a_failure_after_the_round() -> None:
    import threading

    from benchmarks.serve_load import run_clients

    threads: set[int] = set()

    def square(_http: object, index: int) -> int:
        threads.add(threading.get_ident())
        return index * index

    answers, wall = run_clients("http://127.0.0.1:9", 20, 3, square)  # no request is sent: the call is the client's
    assert answers == [index * index for index in range(20)] and wall >= 0
    assert 1 <= len(threads) <= 3

    def fails_once(_http: object, index: int) -> int:
        if index == 7:
            raise ValueError("refused")
        return index

    with pytest.raises(RuntimeError, match="1 of 20 requests failed; first: refused"):
        run_clients("http://127.0.0.1:9", 20, 3, fails_once)


def test_growth_is_over_the_run_of_as_many_steps_where_the_decode_prompt_is_a_context_too() -> None:
    """With the decode prompt's length among the contexts, each growth is over the run of as many steps after that
    prompt, not over the longer decode run: the first steps after a prompt weigh alike in both."""
    from benchmarks.peers_report import figures
    from benchmarks.peers_table import context_rows

    settings = BenchSettings(decode_contexts=(1000, 128))
    assert settings.growth_over_context_run and settings.growth_contexts == (1000,)
    assert not BenchSettings(decode_contexts=(1000,)).growth_over_context_run
    raws = [_raw("pytorch-eager", "eager", 0.010, (128, 1000)), _raw("peer", "onnx", 0.005, (128, 1000))]
    for raw in raws:  # after 128 in 16 steps: 2× the decode run's ms/token in round 1, 2.5× in round 2
        for answer, slower in zip(raw.tasks["decode/128"], (2.0 / 3.0, 2.5 / 5.0), strict=True):
            answer["step_s"] = [slower * s for s in answer["step_s"]]
            answer["total_s"] = answer["first_token_s"] + sum(answer["step_s"])
    found = figures(raws, "pytorch-eager", settings)["pytorch-eager"]
    assert found["rounds"]["decode_ms_per_token/128"] == pytest.approx([40.0, 100.0])
    assert found["rounds"]["decode_growth/1000"] == pytest.approx([1.5, 2.0])  # 60 / 40, 200 / 100
    assert "decode_growth/128" not in found["rounds"]
    report = _report()
    report["peers"] = figures(raws, "pytorch-eager", settings)
    report["settings"].update(decode_contexts=[128, 1000], context_new_tokens=16)
    lines = context_rows(report)
    assert lines[0] == (
        "| system | decode ms/token after 128 tokens, 64 new (× eager) | after 128 tokens, 16 new (× eager) | "
        "after 1,000 tokens, 16 new (× eager) | after 1,000 ÷ after 128, 16 new tokens each, per round |"
    )
    assert lines[2].endswith("| 1.75× (1.50–2.00) |")
    assert "over after 128 in the run of 16 new tokens, as many steps as after 1,000" in lines[-1]
