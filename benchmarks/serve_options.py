"""``gpt2-onnx serve`` with different options on the same requests from the same concurrent clients: which option
set answers more tokens per second on this machine.

Each repeat starts one server per option set in turn (the order rotating between repeats, so that neither always
follows the other), sends one warm-up round (``--warm-up`` requests, a whole round's by default), then ``--rounds``
rounds, and stops it: one server up at a time, so
that an idle one takes nothing from the other. The requests and clients are ``benchmarks/serve_peers.py``'s: 48
prompts of 8..120 words, greedy, 32 tokens at most, not streamed, from 16 client threads.

Figures: tokens/s per round (completion tokens the server reports over the round's wall time); per option set the
median over every round; beside the first option set, the median over repeats of each repeat's ratio of mean
tokens/s (a repeat's servers started within a minute or two of each other) and in how many repeats it was higher.

Words of the form ``NAME=VALUE`` with an upper-case NAME among a variant's options are environment variables for
its server (Ray's and Serve's own settings, for instance ``RAY_SERVE_CONTROL_LOOP_INTERVAL_S=1``), not options.
A variant whose options are ``@without-ray`` runs the same app and engine under uvicorn alone, without Ray Serve
(``benchmarks/serve_without_ray.py``): what Serve's proxy hop and replica actor cost.

    python benchmarks/serve_options.py EXPORT --variant "spinning=--spinning" --variant "sleeping=--no-spinning" \\
        --repeats 3 --out benchmarks/results/STAMP-serve-spinning-NAME.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_load import requests  # noqa: E402  # after the path
from benchmarks.serve_peers import WARM_UP_HELP, Outcomes, machine_now, one_round, warm_up_requests  # noqa: E402
from benchmarks.serve_process import REPLICA_PREFIX, ServeProcess, cpu_seconds  # noqa: E402
from benchmarks.serve_without_ray import OPTION as WITHOUT_RAY  # noqa: E402
from benchmarks.serve_without_ray import AppWithoutRay  # noqa: E402

ENVIRONMENT_WORD = re.compile(r"[A-Z][A-Za-z0-9_]*=")


def server_for(export: Path, logs: Path, options: list[str]) -> ServeProcess:
    """``gpt2-onnx serve`` with ``options`` (its ``NAME=VALUE`` words set in its environment instead); the app
    without Ray Serve for ``@without-ray``."""
    if options == [WITHOUT_RAY]:
        return AppWithoutRay(export, logs)
    env = dict(word.split("=", 1) for word in options if ENVIRONMENT_WORD.match(word))
    flags = [word for word in options if not ENVIRONMENT_WORD.match(word)]
    return ServeProcess(export, logs, "--model-name", "bench", *flags, env=env)


# Process titles → the part of a served round each stands for (the rest of the server's processes: Ray's own).
ROLES = (
    (REPLICA_PREFIX, "replica"),
    ("ray::ProxyActor", "Serve proxy"),
    ("ray::ServeController", "Serve controller"),
)
LOAD_GENERATOR = "load generator"
COMMAND = "server command"  # gpt2-onnx serve's own process; the whole server without Ray
OTHERS = "Ray's other processes"
IDLE = "unused"  # the cores' seconds none of the above used


def role_of(process: psutil.Process, command_pid: int) -> str:
    if process.pid == command_pid:
        return COMMAND
    try:
        title = " ".join(process.cmdline()) or process.name()
    except psutil.Error:
        return OTHERS
    return next((name for prefix, name in ROLES if title.startswith(prefix)), OTHERS)


def cpu_by_role(server: ServeProcess) -> dict[str, float]:
    """CPU seconds so far of the server's processes by role, and this process's (the clients') own."""
    found: dict[str, float] = {LOAD_GENERATOR: cpu_seconds(psutil.Process()) or 0.0}
    for process in [psutil.Process(server.pid), *server.descendants()]:
        seconds = cpu_seconds(process)
        if seconds is not None:
            name = role_of(process, server.pid)
            found[name] = found.get(name, 0.0) + seconds
    return found


def cpu_per_round(before: dict[str, float], after: dict[str, float], wall: float, rounds: int) -> dict[str, float]:
    """CPU seconds per round by role between two :func:`cpu_by_role`, with the cores' seconds left unused."""
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    spent[IDLE] = max(0.0, (os.cpu_count() or 1) * wall - sum(spent.values()))
    return {name: round(seconds / rounds, 2) for name, seconds in spent.items()}


@dataclass
class Found:
    """What :func:`measure` returns: per option set, tokens/s per round of each repeat, and CPU seconds per round
    by role of each repeat."""

    tokens: dict[str, list[list[float]]] = field(default_factory=dict)
    cpu: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def measure(
    export: Path,
    variants: dict[str, list[str]],
    bodies: list[dict[str, Any]],
    clients: int,
    rounds: int,
    repeats: int,
    warm_up: int | None = None,
) -> Found:
    """tokens/s per round, and CPU seconds per round by role, per repeat, per option set."""
    found = Found({name: [] for name in variants}, {name: [] for name in variants})
    names = list(variants)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            with tempfile.TemporaryDirectory(prefix="serve-options-") as logs:
                server = server_for(export, Path(logs), variants[name]).start()
                try:
                    one_round(server.url, bodies[:warm_up], clients, {}, Outcomes("warm-up"))
                    outcomes = Outcomes(name)
                    before, start = cpu_by_role(server), time.perf_counter()
                    for _ in range(rounds):
                        one_round(server.url, bodies, clients, {}, outcomes)
                    after, wall = cpu_by_role(server), time.perf_counter() - start
                finally:
                    server.stop()
            found.tokens[name].append([round(tokens / wall, 1) for _, tokens, wall in outcomes.rounds])
            found.cpu[name].append(cpu_per_round(before, after, wall, rounds))
            print(f"repeat {repeat + 1}/{repeats}: {name} {found.tokens[name][-1]}", file=sys.stderr, flush=True)
    return found


def cpu_summary(cpu: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per option set, the median over repeats of each role's CPU seconds per round."""
    return {
        name: {role: round(float(np.median([r.get(role, 0.0) for r in repeats])), 2) for role in _roles(repeats)}
        for name, repeats in cpu.items()
    }


def _roles(repeats: list[dict[str, float]]) -> list[str]:
    order = [COMMAND, *(name for _, name in ROLES), OTHERS, LOAD_GENERATOR, IDLE]
    seen = {role for r in repeats for role in r}
    return [role for role in order if role in seen]


def summary(found: dict[str, list[list[float]]]) -> list[dict[str, Any]]:
    first = next(iter(found.values()))
    rows = []
    for name, repeats in found.items():
        ratios = [float(np.mean(mine) / np.mean(base)) for mine, base in zip(repeats, first, strict=True)]
        rows.append(
            {
                "name": name,
                "tokens_per_s": round(float(np.median([t for rounds in repeats for t in rounds])), 1),
                "rounds": repeats,
                "ratio_to_first": round(float(np.median(ratios)), 3),
                "repeats_higher": sum(r > 1 for r in ratios),
            }
        )
    return rows


def table(results: dict[str, Any]) -> str:
    settings, machine = results["settings"], results["machine"]
    first = results["variants"][0]["name"]
    lines = [
        f"| export | options | tokens/s, median | tokens/s by repeat | × {first} (repeats higher) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in results["variants"]:
        options = results["options"][row["name"]]
        by_repeat = "; ".join(", ".join(f"{t:.0f}" for t in rounds) for rounds in row["rounds"])
        lines.append(
            f"| {results['export']} | {row['name']}: `{options or '(none)'}` | {row['tokens_per_s']:.1f} | {by_repeat} "
            f"| {row['ratio_to_first']:.3f} ({row['repeats_higher']}/{len(row['rounds'])}) |"
        )
    lines += [
        "",
        f"`gpt2-onnx serve` (one replica, 2 threads, 16 rows) with each option set ({WITHOUT_RAY}: the same app and "
        "engine under uvicorn alone, no Ray Serve), one server up at a time, "
        f"{settings['repeats']} repeats rotating the order, each a warm-up round of {warm_up_requests(settings)} "
        f"requests then {settings['rounds']} rounds of "
        f"{settings['requests']} requests (prompts of 8..120 words, greedy, {settings['max_tokens']} tokens at most) "
        f"from {settings['clients']} client threads; tokens/s: the completion tokens the server reports over the "
        "round's wall time; ×: the median over repeats of the repeat's mean tokens/s ÷ the first option set's. "
        f"Machine: {machine['cpu']}, {machine['cpus']} cores, {machine['platform']}; load average "
        f"{machine['load_before'][0]:.2f} before, {machine['load_after'][0]:.2f} after; onnxruntime "
        f"{machine['onnxruntime']}.",
    ]
    cpu = results.get("cpu_per_round")  # runs before 2026-12-05 06:30 UTC did not record it
    if cpu:
        roles = _roles(list(cpu.values()))
        lines += [
            "",
            f"| CPU seconds per round | {' | '.join(roles)} |",
            f"| --- |{' --- |' * len(roles)}",
            *(
                f"| {name} | {' | '.join(f'{by_role.get(r, 0.0):.2f}' for r in roles)} |"
                for name, by_role in cpu.items()
            ),
            "",
            "CPU seconds (user + system) per timed round of the server's processes by role, of this script's own "
            f"(the {LOAD_GENERATOR}: its client threads) and, as {IDLE}, the rest of the cores' seconds over the "
            "rounds' wall time; medians over repeats.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument(
        "--variant", action="append", metavar="NAME=OPTIONS", required=True,
        help=f"a name and the serve options it adds ('NAME=' for none, 'NAME={WITHOUT_RAY}': no Ray Serve); the "
        "first is the reference",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=48, help="requests per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server start")
    parser.add_argument("--repeats", type=int, default=3, help="server starts per option set")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--warm-up", type=int, help=WARM_UP_HELP)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write (and .md beside it)")
    args = parser.parse_args()
    if any("=" not in given for given in args.variant):
        parser.error("each --variant is NAME=OPTIONS, e.g. 'sleeping=--no-spinning' ('NAME=' for none)")
    variants = {name: shlex.split(options) for name, options in (given.split("=", 1) for given in args.variant)}
    if len(variants) < 2:
        parser.error("give at least two --variant, with different names")
    machine = machine_now()
    bodies = requests(args.requests, args.max_tokens)
    args.warm_up = args.warm_up or args.requests
    found = measure(args.export, variants, bodies, args.clients, args.rounds, args.repeats, args.warm_up)
    machine["load_after"] = os.getloadavg()
    results = {
        "export": args.export.name,
        "options": {name: " ".join(options) for name, options in variants.items()},
        "settings": {
            k: getattr(args, k) for k in ("clients", "requests", "rounds", "repeats", "max_tokens", "warm_up")
        },
        "machine": machine,
        "variants": summary(found.tokens),
        "cpu_per_round": cpu_summary(found.cpu),
        "cpu_per_round_by_repeat": found.cpu,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
