"""The peers side-by-side's pure parts (benchmarks/peers_side_by_side.py): the systems given on the command line,
the figures it reads from the bench's rounds, token agreement, and the machine's CPU features. No peer needed.

Figures, each per round and then the median over rounds; ratios × the baseline are paired per round (each round's
figure over the baseline's of the same round), as ``gpt2_onnx.app.bench.report`` pairs its own:

- ``prefill_ms``: the time to first token of a 128-token prompt *as generation pays it*: the first token of the
  bench's "batch" task, run at batch 1 on the decode prompt right after the same system's "decode" task, so that a
  decode precedes every measured prefill (as in use, where the next prompt follows the last generation);
- ``decode_ms_per_token``: (last − first token's time) / (n − 1) of the "decode" task;
- ``first_token_ms``: the decode task's own time to first token (it follows a one-token generation, a prefill);
- ``prefill_back_to_back_ms``: the bench's "prefill/128" task (it follows the previous round's generation);
- with ``decode_contexts`` (``--decode-contexts``), ``decode_ms_per_token/C``: (last − first token's time) / (n − 1)
  of the "decode/C" task, a generation after a C-token prompt, with its ratio × the baseline paired per round as the
  others; and ``decode_growth/C``: that over the system's own ``decode_ms_per_token`` of the same round (its decode
  after the 128-token prompt), then the median over rounds (no ratio × the baseline). Where 128 is one of the
  contexts too, the growth is over ``decode_ms_per_token/128`` instead, a run of as many steps as the other
  contexts' (``BenchSettings.growth_over_context_run``): the first steps after a prompt, slower than the rest on
  some systems, then weigh alike in both.
"""

from __future__ import annotations

import os
import platform
import resource
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpt2_onnx.app.bench.report import Metric, decode_context_key, decode_growth_key, paired_per_round
from gpt2_onnx.app.bench.tasks import RawResults, decode_context_task, growth_base_task
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec, with_growth_base

__all__ = [
    "CPU_FLAGS",
    "agreement",
    "cpu_flags",
    "cpu_line",
    "cpu_seconds",
    "figures",
    "first_split",
    "other_work",
    "ours_spec",
    "parse_lengths",
    "peer_spec",
    "peers_settings",
    "round_metrics",
]

# /proc/cpuinfo flags that decide which kernels a runtime can use
CPU_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
_POSITIONAL = {"kind", "label", "folder", "factory", "python"}  # set by the command line's positions


def peers_settings(
    threads: int,
    repeats: int,
    warmup: int = 1,
    new_tokens: int = 64,
    decode_contexts: Sequence[int] = (),
    context_new_tokens: int = BenchSettings.context_new_tokens,
) -> BenchSettings:
    """The bench's settings for the side-by-side: one 128-token prompt at batch 1 everywhere; the "batch" task is
    a second decode-prompt generation (batch 1, 128 tokens) and so the prefill that follows a decode. With
    ``decode_contexts``, a decode run after a prompt of each of those lengths too (after the other tasks), of
    ``context_new_tokens`` tokens each, and one after the 128-token decode prompt of as many tokens, which their
    growth divides by."""
    prompt = 128
    return BenchSettings(
        threads=threads,
        prompt_lengths=(prompt,),
        decode_prompt_length=prompt,
        new_tokens=new_tokens,
        batch_size=1,
        batch_prompt_length=prompt,
        repeats=repeats,
        warmup=warmup,
        decode_contexts=with_growth_base(decode_contexts, prompt),
        context_new_tokens=context_new_tokens,
    )


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"512,1000"`` → (512, 1000) (``--decode-contexts``); ValueError, in one line, for anything else."""
    try:
        lengths = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"expected comma-separated token counts such as 512,1000, got '{text}'") from None
    if any(length < 1 for length in lengths):
        raise ValueError(f"every length must be >= 1, got '{text}'")
    return lengths


def _coerce(name: str, text: str) -> Any:
    """``text`` as the type of SystemSpec's field ``name`` (bool, int, float or str)."""
    hints = typing.get_type_hints(SystemSpec)
    if name not in hints or name in _POSITIONAL:
        settable = sorted(set(hints) - _POSITIONAL)
        raise ValueError(f"'{name}' is not a SystemSpec option one can set here (options: {', '.join(settable)})")
    kinds = typing.get_args(hints[name]) or (hints[name],)
    if bool in kinds:
        lowered = text.lower()
        if lowered not in {"true", "false", "1", "0", "yes", "no"}:
            raise ValueError(f"{name}={text}: expected true or false")
        return lowered in {"true", "1", "yes"}
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(text)
            except ValueError:
                raise ValueError(f"{name}={text}: expected {kind.__name__}") from None
    return text


def ours_spec(values: Sequence[str]) -> SystemSpec:
    """``LABEL FOLDER [FIELD=VALUE ...]`` → an export folder on the bench's ONNX path with those runtime options
    (any SystemSpec field, e.g. ``share_weights=false``)."""
    if len(values) < 2:
        raise ValueError(f"--ours needs LABEL FOLDER [FIELD=VALUE ...], got {list(values)}")
    label, folder, *options = values
    fields: dict[str, Any] = {}
    for option in options:
        name, sep, text = option.partition("=")
        if not sep:
            raise ValueError(f"--ours {label}: '{option}' is not FIELD=VALUE")
        fields[name] = _coerce(name, text)
    return SystemSpec("onnx", label, folder=folder, **fields)


def peer_spec(values: Sequence[str]) -> SystemSpec:
    """``LABEL FACTORY PYTHON PATH`` → a peer run by ``FACTORY`` ("module:callable") in ``PYTHON``'s venv."""
    if len(values) != 4:
        raise ValueError(f"--peer needs LABEL FACTORY PYTHON PATH, got {list(values)}")
    label, factory, python, path = values
    if ":" not in factory:
        raise ValueError(f"--peer {label}: the factory '{factory}' is not module:callable")
    return SystemSpec("onnx", label, folder=path, factory=factory, python=python)


def first_split(tokens: Sequence[int], reference: Sequence[int]) -> int | None:
    """The first step at which ``tokens`` leave ``reference`` (a shorter run leaves it where it ends); None: same."""
    for step, (ours, theirs) in enumerate(zip(tokens, reference, strict=False)):
        if ours != theirs:
            return step
    return None if len(tokens) == len(reference) else min(len(tokens), len(reference))


def agreement(tokens: Sequence[int], reference: Sequence[int]) -> str:
    """The verdict on ``tokens``: "identical", or "splits at step k" (k from 0: at 0 the first token differs)."""
    step = first_split(tokens, reference)
    return "identical" if step is None else f"splits at step {step}"


def _ms(key: str) -> Any:
    return lambda answer: 1000.0 * float(answer[key])


def _decode_ms(answer: dict[str, Any]) -> float:
    steps = len(answer["step_s"])  # n − 1
    return 1000.0 * (float(answer["total_s"]) - float(answer["first_token_s"])) / steps


def round_metrics(decode_contexts: Sequence[int] = ()) -> list[Metric]:
    """The side-by-side's figures, each computed from one round's answer of one task (with ``decode_contexts``,
    the decode ms/token after each of those prompt lengths too)."""
    return [
        Metric("prefill_ms", "prefill 128 after a decode (ms)", "batch", _ms("first_token_s")),
        Metric("decode_ms_per_token", "decode ms/token", "decode", _decode_ms),
        Metric("first_token_ms", "time to first token after a prefill (ms)", "decode", _ms("first_token_s")),
        Metric("prefill_back_to_back_ms", "prefill 128, bench's prefill task (ms)", "prefill/128", _ms("s")),
        *(
            Metric(decode_context_key(n), f"decode ms/token after {n} tokens", decode_context_task(n), _decode_ms)
            for n in decode_contexts
        ),
    ]


def _growth_rounds(raw: RawResults, length: int, settings: BenchSettings) -> list[float]:
    """Per round: the system's decode ms/token after ``length`` tokens over its own after the decode prompt (the
    decode run, or the run of as many steps after that prompt: ``BenchSettings.growth_over_context_run``)."""
    rounds = zip(raw.tasks[decode_context_task(length)], raw.tasks[growth_base_task(settings)], strict=True)
    return [_decode_ms(longer) / _decode_ms(base) for longer, base in rounds]


def figures(
    raws: Sequence[RawResults], baseline: str, settings: BenchSettings | None = None
) -> dict[str, dict[str, Any]]:
    """Per system: each figure's median over rounds, its per-round values and, paired per round, its ratios
    × ``baseline``'s (median and per round); with ``settings.decode_contexts``, each growth context's growth over
    the decode prompt's run (median and per round, in ``median`` and ``rounds``)."""
    settings = settings or BenchSettings()
    by_label = {raw.spec.label: raw for raw in raws}
    base = by_label[baseline]
    found: dict[str, dict[str, Any]] = {}
    for label, raw in by_label.items():
        entry: dict[str, Any] = {"median": {}, "rounds": {}, "ratio": {}, "ratio_rounds": {}}
        for metric in round_metrics(settings.decode_contexts):
            rounds = [metric.figure(answer) for answer in raw.tasks[metric.task]]
            ratios = paired_per_round(raw, base, metric)
            entry["median"][metric.key] = float(np.median(rounds))
            entry["rounds"][metric.key] = rounds
            entry["ratio"][metric.key] = float(np.median(ratios))
            entry["ratio_rounds"][metric.key] = ratios
        for n in settings.growth_contexts:
            growth = _growth_rounds(raw, n, settings)
            entry["median"][decode_growth_key(n)] = float(np.median(growth))
            entry["rounds"][decode_growth_key(n)] = growth
        found[label] = entry
    return found


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, bool]:
    """Which of ``CPU_FLAGS`` the first CPU of ``cpuinfo`` lists (empty where there is no such file)."""
    if not cpuinfo.is_file():
        return {}
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return {flag: flag in present for flag in CPU_FLAGS}
    return {}


def cpu_line(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name with the :data:`CPU_FLAGS` it has and lacks, for a report's one line on where it ran:
    two machines of one model name may differ in what their kernels can use (AVX2 only against AVX-512 VNNI)."""
    name = next(
        (
            line.split(":", 1)[1].strip()
            for line in (cpuinfo.read_text(errors="replace").splitlines() if cpuinfo.is_file() else [])
            if line.startswith("model name")
        ),
        platform.processor() or platform.machine() or "?",
    )
    flags = cpu_flags(cpuinfo)
    if not flags:
        return name
    have = ", ".join(flag for flag, present in flags.items() if present) or "none of them"
    lack = ", ".join(flag for flag, present in flags.items() if not present) or "none"
    return f"{name} (has {have}; lacks {lack})"


def cpu_seconds(stat: Path = Path("/proc/stat")) -> dict[str, float]:
    """CPU seconds so far: ``busy`` on all cores (user, nice, system, irq, softirq), ``steal`` (taken by the
    hypervisor), and ``ours``, this process's and its waited-for children's (the bench workers, once closed)."""
    own = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    found = {"ours": sum(usage.ru_utime + usage.ru_stime for usage in own)}
    if stat.is_file():
        ticks = [int(field) for field in stat.read_text().splitlines()[0].split()[1:]]
        hertz = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = (ticks + [0] * 8)[:8]
        found["busy"] = (user + nice + system + irq + softirq) / hertz
        found["steal"] = steal / hertz
    return found


def other_work(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, float] | None:
    """What the rest of the machine did while the bench ran: on average how many cores other processes kept busy,
    and how many the hypervisor took (None where /proc/stat is missing)."""
    if "busy" not in before or "busy" not in after or wall_s <= 0:
        return None
    others = (after["busy"] - before["busy"]) - (after["ours"] - before["ours"])
    return {
        "wall_s": wall_s,
        "other_cores": max(others, 0.0) / wall_s,
        "steal_cores": (after["steal"] - before["steal"]) / wall_s,
    }


def save_result(results: Path, suffix: str, text: str, raw: dict[str, Any]) -> Path:
    """Write ``results``/<UTC stamp>``suffix``.md (``text``) and the .json beside it (``raw``); returns the .md."""
    import datetime
    import json

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{stamp}{suffix}.md"
    path.write_text(text, encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return path
