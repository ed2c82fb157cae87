"""The ``gpt2-onnx`` command line.

:func:`main` runs one command and is the one place that turns the ways it can end into messages and exit codes:
a library error (:class:`~gpt2_onnx_core.errors.Gpt2OnnxError`) or a usage error is one ``Error:`` line with its exit
code, an interrupt is ``Interrupted.`` and 130, and an unexpected exception is one ``Internal error:`` line and 70
unless ``--verbose`` asks for the traceback. Options are read from the command line only, except ``--provider``
(``GPT2_ONNX_PROVIDER``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import click
from click.shell_completion import shell_complete

from gpt2_onnx.cli.logs import configure_logging
from gpt2_onnx.cli.options import VERBOSE_KEY, flag_names
from gpt2_onnx_core import __version__
from gpt2_onnx_core.errors import Gpt2OnnxError, OptionError, first_line
from gpt2_onnx_core.interrupts import ignore_interrupts, install_interrupt_handlers

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "cli", "main"]

PROG_NAME = "gpt2-onnx"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in gpt2-onnx, not in its input
COMPLETE_VARIABLE = (
    "_GPT2_ONNX_COMPLETE"  # click's shell completion: eval "$(_GPT2_ONNX_COMPLETE=bash_source gpt2-onnx)"
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name=PROG_NAME)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Log progress details and show tracebacks of internal errors (also accepted after COMMAND).",
)
def cli(verbose: bool) -> None:
    """Export GPT-2 to ONNX, run it with ONNX Runtime, and prove the two compute the same thing.

    \b
    Examples:
      gpt2-onnx export --model random:gpt2 --weights-seed 0 -o out  # offline, GPT-2-small dimensions
      gpt2-onnx run out -p "The meaning of life is" --max-new-tokens 40
      gpt2-onnx verify out
    """
    configure_logging(verbose)


def _register() -> None:
    from gpt2_onnx.cli.bench_cmd import bench
    from gpt2_onnx.cli.export_cmd import export
    from gpt2_onnx.cli.run_cmd import run
    from gpt2_onnx.cli.serve_cmd import serve
    from gpt2_onnx.cli.transformers_js_cmd import transformers_js
    from gpt2_onnx.cli.verify_cmd import verify

    for command in (export, run, verify, bench, serve, transformers_js):
        cli.add_command(command)


_register()


def main(args: Sequence[str] | None = None) -> NoReturn:
    """Run one command (``args``, default ``sys.argv[1:]``) and exit with its status: the console script and
    ``python -m gpt2_onnx``. Call it from the main thread, which owns the signal handlers it sets."""
    install_interrupt_handlers()  # SIGTERM ends a command as Ctrl-C does, and neither can be swallowed
    if hasattr(signal, "SIGXFSZ"):  # a file-size limit: let the write fail with an error we clean up after
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    instruction = os.environ.get(COMPLETE_VARIABLE)
    if instruction:
        sys.exit(shell_complete(cli, {}, PROG_NAME, COMPLETE_VARIABLE, instruction))
    sys.exit(_exit_status(sys.argv[1:] if args is None else list(args)))


def _exit_status(args: list[str]) -> int:
    """Run the command; every way it ends becomes an exit status, every error one line on stderr."""
    ctx: click.Context | None = None
    try:
        ctx = cli.make_context(PROG_NAME, args)
        with ctx:
            cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help and --version end here, as does ctx.exit()
        return exc.exit_code
    except click.ClickException as exc:  # a usage error (unknown option, invalid choice): one line, not the usage
        hint = f" (see '{exc.ctx.command_path} --help')" if isinstance(exc, click.UsageError) and exc.ctx else ""
        return _error(f"{exc.format_message()}{hint}", exc.exit_code)
    except Gpt2OnnxError as exc:
        return _error(_message(exc, ctx), exc.exit_code)
    except (KeyboardInterrupt, click.Abort):
        return _interrupted()
    except Exception as exc:  # a bug: one line by default, the traceback with --verbose (before or after COMMAND)
        if ctx is not None and (ctx.params.get("verbose") or ctx.meta.get(VERBOSE_KEY)):
            raise
        detail = f"{type(exc).__name__}: {first_line(exc)}" if str(exc).strip() else type(exc).__name__
        click.echo(f"Internal error: {detail} (rerun with --verbose for details)", err=True)
        return EXIT_INTERNAL
    return 0


def _error(message: str, code: int) -> int:
    click.echo(f"Error: {message}", err=True)
    return code


def _message(exc: Gpt2OnnxError, ctx: click.Context | None) -> str:
    """The error's one line; an :class:`OptionError` names the subcommand's flags, not Python parameters."""
    if not isinstance(exc, OptionError):
        return str(exc)
    name = ctx.invoked_subcommand if ctx is not None else None
    command = cli.get_command(ctx, name) if ctx is not None and name else None
    return exc.render(flag_names(command) if command is not None else {})


def _interrupted() -> int:
    """The command stopped at an interrupt and its clean-up is done; from here on SIGINT and SIGTERM are ignored
    (:func:`~gpt2_onnx_core.interrupts.ignore_interrupts`: nothing is left to stop, and the exit status must stay 130
    through the interpreter's shutdown; tests/test_interrupts.py sends signals all through an interrupted
    command's exit)."""
    ignore_interrupts()
    click.echo("Interrupted.", err=True)
    return EXIT_INTERRUPTED
