"""What the command-line tools (fastsubs-query, fastsubs-index, fastsubs-bench) share, and
the library does not use: turning errors and stop signals into one line and an exit
status, ``--version``, and BLAS without threads of its own.  It lives in
:mod:`fastsubs.cli`, beside none of them, because the three tools live in three folders
(query/, indexer/, bench/).

A user's bad input (a model, an index, a query text) must end in one readable line on
stderr, never a traceback; a closed pipe (``| head``) ends the run quietly.

SIGINT (Ctrl-C) and SIGTERM (``timeout``, SLURM, pipeline managers) both become
exceptions in the main thread — KeyboardInterrupt and :class:`Terminated` — so every
``finally`` runs (a build removes its temporary directory, a query records how far its
output got) before the tool exits with 130 or 143 and one line on stderr.  Worker
processes say nothing: they ignore both (their parent stops them, whether the signal
reached it alone or its whole process group) and die with their parent
(:func:`fastsubs.pipeline.processes.become_worker`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from fastsubs.errors import FastsubsError, OutputError
from fastsubs.pipeline.processes import STOP_SIGNALS


def single_threaded_blas() -> None:
    """Ask numpy's BLAS for no threads of its own; call before numpy is imported.

    The command-line tools never call BLAS, but OpenBLAS starts a thread per core when it
    loads, and those threads poll for work, taking time from the cores its workers need
    (docs/performance.md, "Tuning").  Only the CLIs call this (a library must not change its user's BLAS); a
    user's own setting wins.
    """
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(variable, "1")


T = TypeVar("T")

#: Exit status for errors caused by input, as opposed to usage errors (2).
EXIT_INPUT_ERROR = 1
#: What a shell reports for a process ended by SIGPIPE; used when the reader went away.
EXIT_BROKEN_PIPE = 141


class Terminated(BaseException):
    """SIGTERM arrived.  A BaseException, like KeyboardInterrupt: ``except Exception`` lets it pass."""


def _stop(signum: int, frame: object) -> None:
    """Handler of SIGINT/SIGTERM: ignore any further stop signal (the cleanup must finish) and raise."""
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


def version_option(program: str) -> Any:
    """A ``--version`` flag for a typer command or group: prints ``program VERSION`` (and the
    commit it was built from, where known: :mod:`fastsubs.origin`) and exits,
    before anything else is checked (``fastsubs-query --version`` needs no index)."""
    import typer

    from fastsubs import origin

    def show(value: bool) -> None:
        if value:
            print(f"{program} {origin.describe()}")
            raise typer.Exit()

    return typer.Option(False, "--version", is_eager=True, callback=show, help="Print the fastsubs version and exit.")


def _line(head: str, error: BaseException) -> str:
    """``head``, then any notes added to ``error`` on the way out (e.g. where a partial output is kept)."""
    return "; ".join([head, *getattr(error, "__notes__", [])])


def run_reporting_errors(program: str, action: Callable[[], T]) -> T:
    """Run ``action``; report FastsubsError/OSError as ``program: error: …``, SIGINT/SIGTERM as
    ``program: interrupted``/``terminated``, and exit."""
    previous = {stop_signal: signal.signal(stop_signal, _stop) for stop_signal in STOP_SIGNALS}
    try:
        return action()
    except BaseException as error:
        for stop_signal in STOP_SIGNALS:  # the run is over: a late signal must not cut the report short
            signal.signal(stop_signal, signal.SIG_IGN)
        status = _report(program, error)
        if status is None:
            raise
        raise SystemExit(status) from None
    finally:
        for stop_signal, handler in previous.items():
            signal.signal(stop_signal, handler)


def _report(program: str, error: BaseException) -> int | None:
    """Print the line for an error a user can act on and give the exit status; None for
    anything else (a bug: its traceback is wanted)."""
    if isinstance(error, BrokenPipeError):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if isinstance(error, FastsubsError):
        if isinstance(error, OutputError) and error.path == "<stdout>":
            _silence_stdout()  # the interpreter's last flush would fail again
        print(f"{program}: error: {_line(str(error), error)}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        print(f"{program}: error: {_line(f'{where}{error.strerror or error}', error)}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    if isinstance(error, (KeyboardInterrupt, Terminated)):
        interrupted = isinstance(error, KeyboardInterrupt)
        print(f"{program}: {_line('interrupted' if interrupted else 'terminated', error)}", file=sys.stderr)
        return 128 + (signal.SIGINT if interrupted else signal.SIGTERM)
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
