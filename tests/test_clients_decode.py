"""benchmarks/clients_decode.py: the pairing of the C++ and .NET benchmark processes and its table, on known figures
(the programs themselves are built and smoke-run by clients/cpp/ci.sh and clients/dotnet/ci.sh)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks import clients_decode as cd


def _process(client: str, decode: list[float], allocated: list[float] | None = None) -> dict[str, Any]:
    return {
        "client": client,
        "new_tokens": 10,
        "onnxruntime": "1.31.1",
        "prefill_ms": [2.0 * x for x in decode],
        "decode_ms_per_token": decode,
        "allocated_bytes_per_token": allocated,
        "peak_rss_mib": 40.0 if client == "cpp" else 60.0,
    }


LABELS = ("cpp", "dotnet")


def test_the_order_swaps_pair_by_pair() -> None:
    assert [cd.pair_order(LABELS, i) for i in range(3)] == [LABELS, ("dotnet", "cpp"), LABELS]


def test_each_pair_is_the_ratio_of_its_own_medians() -> None:
    pairs = [
        {"cpp": _process("cpp", [1.0, 1.0, 5.0]), "dotnet": _process("dotnet", [1.1, 1.1, 1.1], [64.0, 80.0])},
        {"cpp": _process("cpp", [2.0, 2.0, 2.0]), "dotnet": _process("dotnet", [3.0, 3.0, 3.0], [72.0])},
    ]
    s = cd.summarize(pairs, LABELS)
    assert s["ratios"] == [1.1 / 1.0, 1.5]  # a slow outlier round does not move its pair's median
    assert s["ratio"] == (1.1 + 1.5) / 2
    assert s["pairs_within_target"] == 1  # 1.5 > 1.2
    assert s["decode_ms_per_token"] == {"cpp": 2.0, "dotnet": (1.1 + 3.0) / 2}  # over every round of every pair
    assert s["generation_ms"] == {"cpp": 2.0 * 2 + 10 * 2.0, "dotnet": (1.1 * 12 + 3.0 * 12) / 2}  # prefill + tokens
    assert s["allocated_bytes_per_token"] == {"cpp": None, "dotnet": 80.0}  # the largest round's
    assert s["peak_rss_mib"] == {"cpp": 40.0, "dotnet": 60.0}


def test_the_table_has_a_row_per_fixture() -> None:
    pair = {"cpp": _process("cpp", [1.0]), "dotnet": _process("dotnet", [1.05], [100.0])}
    summary = cd.summarize([pair], LABELS)
    rows = cd.table({"pydocs-micro-fp32": summary, "pydocs-micro-int4": summary}, LABELS)
    assert len(rows) == 4
    assert rows[0].startswith("| fixture | decode ms/token: cpp / dotnet | dotnet ÷ cpp (pairs ≤ 1.2×) |")
    fp32 = "| pydocs-micro-fp32 | 1.000 / 1.050 | 1.050 (1/1) | 2.00 / 2.10 | 12.00 / 12.60 | — / 100 | 40 / 60 |"
    assert rows[2] == fp32


def test_a_program_is_label_equals_command() -> None:
    assert cd.labelled("C++ before=/tmp/b/bench --x") == ("C++ before", ["/tmp/b/bench", "--x"])


def test_a_program_that_fails_stops_the_run(tmp_path: Path) -> None:
    program = tmp_path / "fails.py"
    program.write_text("import sys\nprint('no such folder', file=sys.stderr)\nsys.exit(2)\n", encoding="utf-8")
    settings = cd.Settings(prompt=4, new=2, rounds=1, warmup=0, threads=1)
    try:
        cd.run_client([sys.executable, str(program)], tmp_path, settings)
    except SystemExit as stop:
        assert "exited 2: no such folder" in str(stop)
    else:
        raise AssertionError("a failing program must stop the run")


def test_the_json_line_is_read_after_other_output(tmp_path: Path) -> None:
    program = tmp_path / "bench.py"
    answer = _process("cpp", [0.5])
    program.write_text(f"import sys\nprint('warming up')\nprint({json.dumps(json.dumps(answer))})\n", encoding="utf-8")
    settings = cd.Settings(prompt=4, new=2, rounds=1, warmup=0, threads=1)
    assert cd.run_client([sys.executable, str(program)], tmp_path, settings) == answer
