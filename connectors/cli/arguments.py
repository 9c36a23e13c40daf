"""Argument types of the command line: a bad value is argparse's one-line error (exit 2), not a traceback.

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="streamfair demo")
>>> _ = parser.add_argument("--seed", type=integer_at_least(0))
>>> parser.parse_args(["--seed", "3"]).seed
3
>>> integer_at_least(0)("-1")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be an integer >= 0, got '-1'
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["integer_at_least", "directory", "file_in_a_directory"]


def integer_at_least(minimum: int, at_most: int | None = None) -> Callable[[str], int]:
    """The type of an integer option whose values start at ``minimum`` (and end at ``at_most``, if given).

    >>> integer_at_least(0, at_most=65535)("70000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer in 0..65535, got '70000'
    """
    wanted = f">= {minimum}" if at_most is None else f"in {minimum}..{at_most}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum or (at_most is not None and value > at_most):
            raise argparse.ArgumentTypeError(f"must be an integer {wanted}, got {text!r}")
        return value

    parse.__name__ = f"integer {wanted}"  # what argparse names in its own messages
    return parse


def directory(text: str) -> Path:
    """A directory, existing or to be made: not an existing file.

    >>> directory(__file__)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a directory, got the file '...arguments.py'
    """
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"must be a directory, got the file {text!r}")
    return path


def file_in_a_directory(text: str) -> str:
    """A file to write, in a directory that exists.

    >>> file_in_a_directory("/no/such/directory/broker.pid")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: its directory does not exist: '/no/such/directory/broker.pid'
    """
    if not Path(text).parent.is_dir():
        raise argparse.ArgumentTypeError(f"its directory does not exist: {text!r}")
    return text
