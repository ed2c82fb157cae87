"""The command line's contract, kept by ``gpt2_onnx.cli.main``: every way a command ends is one line and an exit
code; each flag means one thing on every command; only ``--provider`` reads the environment."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from gpt2_onnx.app import generate
from gpt2_onnx.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, cli
from gpt2_onnx.cli.options import PROVIDER_VARIABLE
from tests.helpers import invoke, one_error_line


@pytest.mark.parametrize(
    ("args", "fragment", "hint"),
    [
        (["run", "out", "--nope"], "No such option '--nope'", "gpt2-onnx run --help"),
        (["--nope"], "No such option '--nope'", "gpt2-onnx --help"),
        (["frobnicate"], "No such command 'frobnicate'", "gpt2-onnx --help"),
        (["run", "out", "-p", "x", "--provider", "tpu"], "'tpu' is not one of 'cpu', 'cuda'", "gpt2-onnx run --help"),
        (["export", "--weights-seed", "x"], "'x' is not a valid integer", "gpt2-onnx export --help"),
    ],
)
def test_a_usage_error_is_one_line_with_the_help_hint(args: list[str], fragment: str, hint: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.output.splitlines() == [one_error_line(result.output)]  # no usage text around it
    assert fragment in result.output and result.output.rstrip().endswith(f"(see '{hint}')"), result.output


def test_help_and_version_exit_0() -> None:
    assert invoke("--version").output.startswith("gpt2-onnx, version ")
    for args in (["-h"], ["run", "--help"], ["bench", "-h"]):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage: gpt2-onnx" in result.output, result.output


def test_an_interrupt_is_one_line_and_exit_130(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "open_export", interrupted)
    result = invoke("run", str(tiny_export), "-p", "Hi")
    assert result.exit_code == EXIT_INTERRUPTED
    assert (result.stdout, result.stderr) == ("", "Interrupted.\n")


def test_an_unexpected_exception_is_one_internal_error_line(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(generate, "open_export", broken)
    result = invoke("run", str(tiny_export), "-p", "Hi")
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr == "Internal error: RuntimeError: first line second line (rerun with --verbose for details)\n"


def options_by_flag() -> dict[str, dict[str, click.Option]]:
    """Every long flag → {command: its option}."""
    found: dict[str, dict[str, click.Option]] = {}
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param, click.Option):
                for flag in (opt for opt in param.opts if opt.startswith("--")):
                    found.setdefault(flag, {})[name] = param
    return found


def test_a_flag_on_one_command_is_a_flag_on_every_command() -> None:
    """--json once took a PATH on verify and was a flag elsewhere; a word takes a value everywhere or nowhere."""
    for flag, options in options_by_flag().items():
        kinds = {name: option.is_flag for name, option in options.items()}
        assert len(set(kinds.values())) == 1, f"{flag}: {kinds}"


def test_each_seed_has_a_name_saying_what_it_seeds() -> None:
    flags = options_by_flag()
    assert set(flags["--seed"]) == {"run"}  # sampling
    assert set(flags["--weights-seed"]) == {"export", "bench"}  # random:NAME weights
    assert set(flags["--prompt-seed"]) == {"bench"}  # the random prompt token ids
    assert all(option.help and "weights" in option.help for option in flags["--weights-seed"].values())
    assert not {"--model-seed", "--json-path"} & set(flags)


def test_threads_are_intra_op_threads_on_every_command() -> None:
    threads = options_by_flag()["--threads"]
    assert set(threads) == {"run", "verify", "bench", "serve"}
    assert all(option.help and option.help.startswith("Intra-op threads of ") for option in threads.values())


def test_only_provider_and_the_api_key_read_the_environment() -> None:
    """No GPT2_ONNX_<COMMAND>_<OPTION> for every option (click's auto_envvar_prefix): two documented variables,
    the provider and serve's API key (a secret is better kept out of the command line)."""
    assert "auto_envvar_prefix" not in cli.context_settings
    readers = {
        (name, param.name)
        for name, command in cli.commands.items()
        for param in command.params
        if isinstance(param, click.Option) and param.envvar
    }
    expected = {("run", "provider"), ("verify", "provider"), ("bench", "provider"), ("serve", "provider")}
    assert readers == expected | {("serve", "api_key")}
    assert f"[env var: {PROVIDER_VARIABLE};" in " ".join(invoke("run", "--help").output.split())


def test_other_variables_are_not_options(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT2_ONNX_RUN_TEMPERATURE once set --temperature (and was then refused without --sample): now it is no
    option at all."""
    monkeypatch.setenv("GPT2_ONNX_RUN_TEMPERATURE", "0.5")
    monkeypatch.setenv("GPT2_ONNX_RUN_MAX_NEW_TOKENS", "0")
    result = invoke("run", str(tiny_export), "-p", "Hi", "-n", "2")
    assert result.exit_code == 0, result.output


def test_the_provider_variable_counts_as_given(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROVIDER_VARIABLE, "cuda")
    short = ("--new-tokens", "3", "--prompt-lengths", "2", "--decode-prompt-length", "4", "--batch-prompt-length", "3")
    result = invoke("bench", str(tiny_export), *short, "--no-eager", "--unshared")
    assert result.exit_code == 2 and "--unshared applies on the CPU only" in one_error_line(result.output)


def test_shell_completion_is_click_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_GPT2_ONNX_COMPLETE", "bash_source")
    result = invoke()
    assert result.exit_code == 0 and "_gpt2_onnx_completion" in result.output
