"""scripts/clients_agree.py: the cases every client runs, and what counts as a disagreement (the clients themselves
are run by .ci/run on a machine that has them)."""

from __future__ import annotations

import argparse
import json

import pytest

from scripts import clients_agree as ca


def test_every_expectation_prompt_is_a_greedy_case_with_its_ids() -> None:
    expectations = json.loads((ca.FIXTURES / "expectations.json").read_text(encoding="utf-8"))
    found = ca.cases(expectations)
    greedy = [case for case in found if case.expected_ids is not None]
    prompts = [(f, p["text"]) for f, export in expectations["exports"].items() for p in export["prompts"]]
    assert [(case.fixture, case.prompt) for case in greedy] == prompts
    assert all("--seed" not in case.options and "--temperature" not in case.options for case in greedy)
    sampled = [case for case in found if case.expected_ids is None]
    seeds_per_fixture = sum(len(seeds) for _, seeds in ca.SAMPLED)
    assert len(sampled) == seeds_per_fixture * len(expectations["exports"])
    assert all("--seed" in case.options for case in sampled)


def test_a_case_ends_with_json_and_keeps_its_options() -> None:
    case = ca.Case("f", "hi", {"--max-new-tokens": "4", "--top-k": "3", "--seed": "3"})
    assert case.arguments() == ["--prompt", "hi", "--max-new-tokens", "4", "--top-k", "3", "--seed", "3", "--json"]
    assert case.label() == "f: 'hi' top-k=3 seed=3"


def test_differing_ids_and_wrong_greedy_ids_are_each_reported() -> None:
    case = ca.Case("f", "hi", {"--max-new-tokens": "2"}, expected_ids=(5, 6))
    same = {"prompt_ids": [1, 2], "ids": [5, 6]}
    assert ca.disagreements(case, {"cpp": same, "js": dict(same)}) == []
    other = {"prompt_ids": [1, 2], "ids": [5, 7]}
    problems = ca.disagreements(case, {"cpp": same, "dotnet": other})
    assert len(problems) == 2
    assert "ids differ: cpp [5, 6]; dotnet [5, 7]" in problems[0]
    assert "dotnet's ids [5, 7] are not [5, 6]" in problems[1]


def test_a_client_is_name_equals_command() -> None:
    assert ca.parse_client("js=node bin/gpt2-onnx-js.js") == ("js", ["node", "bin/gpt2-onnx-js.js"])
    with pytest.raises(argparse.ArgumentTypeError):
        ca.parse_client("node bin/gpt2-onnx-js.js")
