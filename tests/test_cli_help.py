"""Every default ``--help`` shows is the one the library applies: each command's help is rendered, and each default
it states is compared with the field or constant that defines it (GenerationOptions, BenchSettings, VerifyOptions,
ExportOptions, the serve limits, the precision table), so that no help text can keep a default that moved."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import click

from gpt2_onnx.app.openai_api import ApiSettings
from gpt2_onnx.app.verify_report import VerifyOptions
from gpt2_onnx.cli import cli
from gpt2_onnx.cli.generation_flags import FLAGS, GenerationFlag
from gpt2_onnx.cli.serve_cmd import CLUSTER_CPUS_PER_REPLICA, CUDA_GPUS_PER_REPLICA
from gpt2_onnx_core.bench_settings import BenchSettings
from gpt2_onnx_core.config import RANDOM_WEIGHTS_SEED, ExportOptions
from gpt2_onnx_core.precisions import PRECISIONS
from gpt2_onnx_runtimes.batching import EngineOptions
from gpt2_onnx_runtimes.options import GenerationOptions
from tests.helpers import invoke


def _flat(text: str) -> str:
    """Help text with its wrapping undone (click also wraps after a hyphen)."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def _help(name: str) -> str:
    result = invoke(name, "--help")
    assert result.exit_code == 0, result.output
    return _flat(result.stdout)


def _shown_defaults(name: str) -> dict[str, str]:
    """Each option's "[default: X]" as ``gpt2-onnx NAME --help`` shows it, by parameter name."""
    command = cli.commands[name]
    text = _help(name)
    ctx = click.Context(command, info_name=name, parent=click.Context(cli, info_name="gpt2-onnx"))
    shown = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name and "default" in param.get_help_extra(ctx):
            default = param.get_help_extra(ctx)["default"]
            assert _flat(f"default: {default}") in text, (name, param.name, default)
            shown[param.name] = default
    return shown


def _defaults(settings: type) -> dict[str, Any]:
    return {field.name: field.default for field in fields(settings)}


def test_every_command_renders_its_help() -> None:
    for name in cli.commands:
        assert _help(name).startswith(f"Usage: gpt2-onnx {name} ")


def test_run_shows_generation_options_own_defaults() -> None:
    options = GenerationOptions()
    words = {"do_sample": "sample" if options.do_sample else "greedy", "early_stopping": str(options.early_stopping)}
    expected = {
        name: f"the checkpoint's, else {words.get(name, str(getattr(options, name))).lower()}"
        for name in FLAGS
        if getattr(options, name) not in (None, ())
    }
    shown = _shown_defaults("run")
    flags = {p.name for p in cli.commands["run"].params if isinstance(p, GenerationFlag)}
    assert {name: shown[name] for name in flags if name in shown} == expected
    assert len(expected) == 15  # every generation flag with a default of its own says it


def test_bench_verify_and_export_show_their_settings_defaults() -> None:
    bench = _defaults(BenchSettings)
    bench["prompt_lengths"] = ",".join(map(str, bench["prompt_lengths"]))
    for name, settings in (
        ("bench", bench),
        ("verify", _defaults(VerifyOptions)),
        ("export", _defaults(ExportOptions)),
    ):
        shown = _shown_defaults(name)
        compared = {key: value for key, value in shown.items() if key in settings}
        assert compared == {key: str(settings[key]) for key in compared}, name
    assert set(_shown_defaults("bench")) >= {"threads", "new_tokens", "repeats", "warmup", "attention", "seed"}
    assert set(_shown_defaults("verify")) >= {"steps", "batch_size"}
    assert set(_shown_defaults("export")) >= {"model", "output", "opset", "precision"}
    settings = BenchSettings()
    example = f"batch 1, {settings.threads} threads, prompt {settings.decode_prompt_length}, {settings.new_tokens} new"
    assert example in _help("bench")


def test_export_help_states_the_seed_and_block_sizes_in_use() -> None:
    text = _help("export")
    assert f"Seed of random:NAME weights (default {RANDOM_WEIGHTS_SEED})" in text
    blocks = [f"{p.flag} {p.quantization.block_size}" for p in PRECISIONS if p.quantization is not None]
    assert len(blocks) == 2 and f"(default: {', '.join(blocks)};" in text


def test_verify_help_states_each_precisions_perplexity_limit() -> None:
    text = _help("verify")
    for precision in PRECISIONS:
        limit = precision.perplexity.max_relative
        assert limit is not None and f"{precision.flag} {limit * 100:g} %" in text


def test_serve_shows_the_limits_its_engine_and_api_apply() -> None:
    engine, api = EngineOptions(), _defaults(ApiSettings)
    expected = {
        "max_batch": str(engine.max_rows),
        "max_queue": str(engine.max_waiting),
        "timeout": str(api["timeout_s"]),
        "max_body_bytes": str(api["max_body_bytes"]),
    }
    shown = _shown_defaults("serve")
    assert {name: shown[name] for name in expected} == expected
    text = _help("serve")
    assert (
        f"{CLUSTER_CPUS_PER_REPLICA:g} on a cluster" in text
        and f"With --provider cuda [{CUDA_GPUS_PER_REPLICA:g}]" in text
    )
