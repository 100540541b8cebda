"""What both command-line tools share: turning errors into one line and a non-zero exit.

A user's bad input (a model, an index, a query text) must end in one readable line on
stderr, never a traceback; a closed pipe (``| head``) ends the run quietly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from fastsubs.errors import FastsubsError

T = TypeVar("T")

#: Exit status for errors caused by input, as opposed to usage errors (2).
EXIT_INPUT_ERROR = 1
#: What a shell reports for a process ended by SIGPIPE; used when the reader went away.
EXIT_BROKEN_PIPE = 141


def run_reporting_errors(program: str, action: Callable[[], T]) -> T:
    """Run ``action``; report FastsubsError/OSError as ``program: error: …`` and exit."""
    try:
        return action()
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(EXIT_BROKEN_PIPE) from None
    except FastsubsError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT_ERROR) from None
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        print(f"{program}: error: {where}{error.strerror or error}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT_ERROR) from None
    except KeyboardInterrupt:
        print(f"{program}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
