"""SIGINT and SIGTERM that no library can swallow.

Python runs a signal handler between two bytecodes of the main thread, wherever it is, and a handler that raises
``KeyboardInterrupt`` raises it there. When that place is Python code called from C that clears errors (before
Python 3.13 ``PyObject_HasAttr`` drops any exception, ``PyDict_GetItem`` drops those of ``__eq__``; C++ extensions
such as torch's tracer catch and retry), the interrupt is lost without a trace. Seen in CI: a SIGTERM sent during
tracing, and the export ran to the end and exited 0.

So the command line's handlers also *record* the signal (:func:`install_interrupt_handlers`), and long work checks
for a recorded one at its checkpoints (:func:`raise_if_interrupted`: every stage's start and end, an export's
commit, each generated token). An interrupt then always ends the work, at the latest at the next checkpoint.
Without the handlers (a library user's own process) nothing is recorded and the checkpoints do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = [
    "handlers_kept",
    "ignore_interrupts",
    "install_interrupt_handlers",
    "raise_if_interrupted",
    "signals_deferred",
]

_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # signals the installed handlers saw, in order


def _record_and_raise(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt  # unwinds through the same clean-up as Ctrl-C (no half-written export folder)


def install_interrupt_handlers() -> None:
    """Make SIGINT and SIGTERM raise ``KeyboardInterrupt`` and stay recorded for :func:`raise_if_interrupted`.

    Call from the main thread of a program's entry point (the CLI does); Python allows handlers nowhere else."""
    for signum in _INTERRUPTS:
        signal.signal(signum, _record_and_raise)


def ignore_interrupts() -> None:
    """Ignore SIGINT and SIGTERM from now on: the command has stopped and cleaned up, and its exit status is set.

    A signal handled in Python would raise KeyboardInterrupt while SystemExit unwinds (Python then ends the process
    by SIGINT: -2 to a caller), and one that comes once the interpreter's shutdown has put the default handlers
    back would end it by that signal; ignoring is the one disposition the shutdown keeps. The interrupt that was
    handled is then cleared from the interpreter's record (:func:`_forget_unhandled_interrupt`)."""
    for signum in _INTERRUPTS:
        signal.signal(signum, signal.SIG_IGN)
    _forget_unhandled_interrupt()


def _forget_unhandled_interrupt() -> None:
    """Clear CPython's "a KeyboardInterrupt went unhandled" flag, which would turn the exit status into SIGINT.

    CPython sets that flag whenever a KeyboardInterrupt leaves code run by ``exec``/``eval`` of a *string*
    (``PyRun_String``: dataclasses, namedtuple and sympy define code that way, many times while torch.export
    traces), even when a caller further up catches it, and under ``python -m`` (``Py_RunMain``) it ends the
    process by SIGINT after the interpreter's shutdown, whatever ``sys.exit`` said: an interrupt handled into
    exit status 130 (or serve's 0) became -2 whenever the signal's handler happened to run inside such code.
    Every such run starts by clearing the flag, so one empty run here clears it; no interrupt can set it again,
    they are ignored by now. tests/test_interrupts.py delivers a SIGTERM inside ``eval`` to check it."""
    exec("", {})  # an empty string: its only effect is the interpreter's reset of the flag


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` again when an interrupt came earlier, even if something swallowed the first."""
    if _received:
        raise KeyboardInterrupt


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block, then deliver any that came, to the handlers in force before.

    Python runs signal handlers in the main thread only, so elsewhere this does nothing (and is not needed: no
    handler can interrupt that thread's block)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in _INTERRUPTS}

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for signum in _INTERRUPTS:
        signal.signal(signum, remember)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python
        for came in dict.fromkeys(received):
            signal.raise_signal(came)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Put SIGINT's and SIGTERM's handlers back after a block that replaces them, and keep an interrupt one.

    ``ray.init`` does both: it sets a SIGTERM handler of its own in Python (``sys.exit(15)``) and, as it connects,
    its C++ core installs a crash handler for SIGTERM that prints a stack dump and aborts. Setting the handlers
    again afterwards (``signal.signal`` installs Python's C handler anew) makes SIGTERM end the command as Ctrl-C
    does; one that comes during the block, handled by Ray's ``sys.exit(15)``, becomes the same interrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in _INTERRUPTS}
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        raise KeyboardInterrupt from exc
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
