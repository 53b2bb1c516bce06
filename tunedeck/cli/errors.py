"""How the CLI reports tunedeck errors: the message, no traceback, a non-zero exit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tunedeck.core.errors import TunedeckError

T = TypeVar("T")
err_console = Console(stderr=True)


@contextmanager
def reported_errors(exit_code: int = 1) -> Iterator[None]:
    """Turn a TunedeckError into a red message on stderr and `exit_code`."""
    try:
        yield
    except TunedeckError as error:
        print_error(error)
        raise typer.Exit(exit_code) from None


def print_error(error: BaseException) -> None:
    """`error: <message>` in red on stderr."""
    # The message is text, not markup: paths and library errors hold square brackets.
    err_console.print(f"[red]error:[/red] {escape(str(error))}", markup=True, highlight=False, soft_wrap=True)


def run_reported(action: Callable[[], T], exit_code: int = 1) -> T:
    """Call `action`, reporting a TunedeckError as `reported_errors` does."""
    with reported_errors(exit_code):
        return action()
    raise AssertionError("unreachable")  # pragma: no cover - reported_errors re-raises as Exit
