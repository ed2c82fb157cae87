"""Closed choices (execution providers, session layouts) are Literal types narrowed by the core, never cast: each
name is accepted as itself, any other string is refused naming the choices, and the command line offers exactly
the Literal's names (click.Choice returns the very choice, so a command's parameter has the Literal type)."""

from __future__ import annotations

from typing import get_args

import click
import pytest

from gpt2_onnx.cli import cli
from gpt2_onnx_core.bench_settings import SystemSpec
from gpt2_onnx_core.errors import OptionError
from gpt2_onnx_core.layouts import (
    IN_PLACE_KV_MODES,
    SESSION_LAYOUTS,
    InPlaceKv,
    SessionLayout,
    session_layout,
)
from gpt2_onnx_core.providers import PROVIDER_NAMES, PROVIDERS, ProviderName, provider_name


def test_each_name_narrows_to_itself_and_others_are_refused() -> None:
    assert PROVIDER_NAMES == get_args(ProviderName) == tuple(PROVIDERS)
    assert SESSION_LAYOUTS == get_args(SessionLayout) == ("auto", "merged", "split")
    assert [provider_name(name) for name in PROVIDER_NAMES] == list(PROVIDER_NAMES)
    assert [session_layout(name) for name in SESSION_LAYOUTS] == list(SESSION_LAYOUTS)
    assert IN_PLACE_KV_MODES == get_args(InPlaceKv) == ("auto", "on", "off")
    with pytest.raises(OptionError, match="provider must be one of cpu, cuda, got 'tpu'") as refused:
        provider_name("tpu")
    assert refused.value.render({"provider": "--provider"}).startswith("--provider must be one of")
    with pytest.raises(OptionError, match="layout must be one of auto, merged, split, got 'CPU'"):
        session_layout("CPU")


def test_the_command_line_offers_exactly_the_literal_names() -> None:
    offered: dict[str, set[tuple[str, ...]]] = {"provider": set(), "layout": set(), "in_place_kv": set()}
    for command in cli.commands.values():
        for param in command.params:
            if param.name in offered and isinstance(param.type, click.Choice):
                offered[param.name].add(tuple(param.type.choices))
    assert offered == {"provider": {PROVIDER_NAMES}, "layout": {SESSION_LAYOUTS}, "in_place_kv": {IN_PLACE_KV_MODES}}


def test_a_bench_system_from_json_keeps_its_layout_and_refuses_another() -> None:
    spec = SystemSpec("onnx", "split", folder="out", layout="split")
    assert SystemSpec.from_json(spec.to_json()) == spec
    with pytest.raises(OptionError, match="layout must be one of"):
        SystemSpec.from_json({**spec.to_json(), "layout": "both"})
