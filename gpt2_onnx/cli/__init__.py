"""The ``gpt2-onnx`` command line.

Library errors (:class:`~gpt2_onnx.errors.Gpt2OnnxError`) become one-line messages and exit codes here and only
here; an unexpected exception is one line too unless ``--verbose`` asks for the traceback.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import click

from gpt2_onnx import __version__
from gpt2_onnx.cli.logs import configure_logging
from gpt2_onnx.cli.options import flag_names
from gpt2_onnx.errors import Gpt2OnnxError, OptionError, first_line
from gpt2_onnx.interrupts import install_interrupt_handlers

__all__ = ["cli", "main"]

EXIT_INTERRUPTED = 130
EXIT_INTERNAL = 70


def _message(exc: Gpt2OnnxError, ctx: click.Context, group: click.Group) -> str:
    """The error's one line; an :class:`OptionError` names the subcommand's flags, not Python parameters."""
    if not isinstance(exc, OptionError):
        return str(exc)
    command = group.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
    return exc.render(flag_names(command) if command is not None else {})


class Gpt2OnnxGroup(click.Group):
    """A click group that turns library errors into one-line messages with their exit codes."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **kwargs: Any,
    ) -> Any:
        """As click's, but a usage error (unknown option, invalid choice) is one ``Error:`` line too, not the usage
        text; ``--help`` still prints the help."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **kwargs)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if isinstance(exc, click.UsageError) and exc.ctx else ""
            click.echo(f"Error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Gpt2OnnxError as exc:
            click.echo(f"Error: {_message(exc, ctx, self)}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # a bug: one line by default, the traceback with --verbose (before or after COMMAND)
            if ctx.params.get("verbose") or ctx.meta.get("gpt2_onnx.verbose"):
                raise
            detail = f"{type(exc).__name__}: {first_line(exc)}" if str(exc).strip() else type(exc).__name__
            click.echo(f"Internal error: {detail} (rerun with --verbose for details)", err=True)
            ctx.exit(EXIT_INTERNAL)


@click.group(
    cls=Gpt2OnnxGroup,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "GPT2_ONNX"},
)
@click.version_option(__version__, "--version", prog_name="gpt2-onnx")
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
      gpt2-onnx export --model random:gpt2 --seed 0 -o out     # offline, GPT-2-small dimensions
      gpt2-onnx run out -p "The meaning of life is" --max-new-tokens 40
      gpt2-onnx verify out
    """
    configure_logging(verbose)


def _register() -> None:
    from gpt2_onnx.cli.bench_cmd import bench
    from gpt2_onnx.cli.export_cmd import export
    from gpt2_onnx.cli.run_cmd import run
    from gpt2_onnx.cli.serve_cmd import serve
    from gpt2_onnx.cli.verify_cmd import verify

    for command in (export, run, verify, bench, serve):
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    install_interrupt_handlers()  # SIGTERM ends a command as Ctrl-C does, and neither can be swallowed
    if hasattr(signal, "SIGXFSZ"):  # a file-size limit: let the write fail with an error we clean up after
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        cli.main(prog_name="gpt2-onnx")
    except SystemExit as exc:
        if exc.code != EXIT_INTERRUPTED:
            raise
        # Interrupted, and the clean-up is done. Leave now with exit code 130: seen once under load, the
        # interpreter's own shutdown (library atexit hooks and threads met mid-import by the interrupt) ended the
        # process by SIGINT instead, which callers see as -2, not 130.
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(EXIT_INTERRUPTED)
