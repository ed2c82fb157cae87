"""The clients agree: the C++, .NET and JavaScript clients' ``run`` commands give the same ids for the same prompt,
settings and seed on the committed fixtures, greedy and sampled, and their greedy ids are fixtures/expectations.json's.

Each client implements one sampling procedure with one generator (SplitMix64; docs/javascript.md, "Sampling and
its random numbers"), so that a seed means the same tokens in every language. Each client's command is called as

    COMMAND run FOLDER --prompt TEXT --max-new-tokens N [--temperature T] [--top-k K] [--top-p P] [--seed S] --json

and prints one JSON object with ``prompt_ids``, ``ids`` (new tokens) and ``text``. Every disagreement is collected,
then all are reported at once; exit 1 if there is any. Standard library only (it runs where PyPI does not).

    python3 scripts/clients_agree.py --client cpp=clients/cpp/build/gpt2_onnx_run \\
        --client "dotnet=dotnet clients/dotnet/samples/Gpt2Onnx.Sample/bin/Release/net10.0/gpt2-onnx-dotnet.dll" \\
        --client "js=node clients/js/bin/gpt2-onnx-js.js"
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
# (settings, seeds). Every setting bounds the candidates with top-k: the JavaScript client runs another ONNX Runtime
# release (onnxruntime-node) than the C++ and .NET clients (the NuGet native library), whose logits differ in the
# last bits, and over the whole vocabulary at a high temperature (50,257 candidates of ~2e-5 each) a draw falls that
# close to a boundary often enough to flip a token: fp32, "The return value of the function is", temperature 1.5,
# seed 1 drew u = 0.97100275 at its third step, 1.1e-7 from the boundary between two tokens whose logits differed by
# 3e-6. With 3 to 50 candidates the intervals are thousands of times wider.
SAMPLED = (
    ({"--temperature": "0.8", "--top-k": "40", "--top-p": "0.95"}, (0, 7, 1234)),
    ({"--temperature": "1.5", "--top-k": "50"}, (1, 99)),
    ({"--top-k": "3"}, (3,)),
)
SAMPLED_TOKENS = 24


@dataclass(frozen=True)
class Case:
    """One generation every client runs: its arguments after the folder, and the expected ids where known."""

    fixture: str
    prompt: str
    options: dict[str, str] = field(default_factory=dict)
    expected_ids: tuple[int, ...] | None = None  # greedy cases: expectations.json's

    def arguments(self) -> list[str]:
        words = ["--prompt", self.prompt]
        for name, value in self.options.items():
            words += [name, value]
        return [*words, "--json"]

    def label(self) -> str:
        settings = " ".join(f"{k.lstrip('-')}={v}" for k, v in self.options.items() if k != "--max-new-tokens")
        return f"{self.fixture}: {self.prompt!r} {settings or 'greedy'}"


def cases(expectations: dict[str, Any]) -> list[Case]:
    """Each fixture's expectation prompts greedy, then its first prompt sampled with each setting and seed."""
    found = []
    for fixture, export in expectations["exports"].items():
        for prompt in export["prompts"]:
            greedy = prompt["greedy"]
            options = {"--max-new-tokens": str(greedy["max_new_tokens"])}
            found.append(Case(fixture, prompt["text"], options, tuple(greedy["ids"])))
        first = export["prompts"][0]["text"]
        for settings, seeds in SAMPLED:
            for seed in seeds:
                options = {"--max-new-tokens": str(SAMPLED_TOKENS), **settings, "--seed": str(seed)}
                found.append(Case(fixture, first, options))
    return found


def run_one(command: list[str], case: Case) -> dict[str, Any]:
    """One client's answer to one case; a failure is a SystemExit naming the command."""
    full = [*command, "run", str(FIXTURES / case.fixture), *case.arguments()]
    done = subprocess.run(full, capture_output=True, text=True, encoding="utf-8", check=False)
    if done.returncode != 0:
        raise SystemExit(f"clients_agree: {shlex.join(full)} exited {done.returncode}: {done.stderr.strip()}")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            answer: dict[str, Any] = json.loads(line)
            return answer
    raise SystemExit(f"clients_agree: {shlex.join(full)} printed no JSON object")


def disagreements(case: Case, answers: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with one case's answers ({client: answer}): ids (prompt or new) that differ between clients,
    and greedy ids that are not the expectation's."""
    problems = []
    for key in ("prompt_ids", "ids"):
        distinct = {json.dumps(answer[key]) for answer in answers.values()}
        if len(distinct) > 1:
            each = "; ".join(f"{client} {answer[key]}" for client, answer in answers.items())
            problems.append(f"{case.label()}: {key} differ: {each}")
    if case.expected_ids is not None:
        for client, answer in answers.items():
            if tuple(answer["ids"]) != case.expected_ids:
                problems.append(f"{case.label()}: {client}'s ids {answer['ids']} are not {list(case.expected_ids)}")
    return problems


def parse_client(text: str) -> tuple[str, list[str]]:
    name, sep, command = text.partition("=")
    if not sep or not name or not command.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=COMMAND")
    return name, shlex.split(command)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", action="append", type=parse_client, required=True, help="NAME=COMMAND")
    args = parser.parse_args()
    clients: dict[str, list[str]] = dict(args.client)
    if len(clients) < 2:
        parser.error("name at least two clients")
    expectations = json.loads((FIXTURES / "expectations.json").read_text(encoding="utf-8"))
    problems: list[str] = []
    all_cases = cases(expectations)
    for case in all_cases:
        answers = {name: run_one(command, case) for name, command in clients.items()}
        problems += disagreements(case, answers)
    if problems:
        print(f"clients_agree: {len(problems)} disagreement(s):", *problems, sep="\n", file=sys.stderr)
        return 1
    sampled = sum(case.expected_ids is None for case in all_cases)
    print(
        f"clients_agree: {', '.join(clients)} give the same ids in all {len(all_cases)} cases "
        f"({len(all_cases) - sampled} greedy, equal to fixtures/expectations.json; {sampled} sampled with seeds)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
