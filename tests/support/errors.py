"""The check of the validation tests: a call refused with a ``ValueError`` naming the argument and the value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def check_error(call: Callable[[], Any], *fragments: str) -> None:
    """``call()`` raises ValueError whose message contains every fragment (the name, the value)."""
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
