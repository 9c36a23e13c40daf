"""Every public object documents itself: numpydoc sections, a runnable example, type hints.

The public API is what each package lists in ``__all__``, and whatever the README and the docs
import from ``streamfair`` or ``connectors``.  Each class and function there has a
numpydoc docstring with its parameters (in signature order), what it returns or yields, and an
Examples section (the examples run as doctests); each public method of those classes documents
its parameters and what it returns.  Every public function and method is annotated, so that mypy
checks its body.  The checks are numpydoc's own validation codes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from numpydoc.validate import validate

from tests.support import REPO
from tests.support.docs_blocks import python_blocks

PROJECT = ("streamfair", "connectors")
PACKAGES = (
    "streamfair",
    "streamfair.dro",
    "streamfair.complex_metrics",
    "streamfair.surrogates",
    "connectors.river",
    "connectors.prometheus",
    "connectors.cli",
)
#: numpydoc's codes checked on each class and function of ``__all__``: a docstring (GL08), every
#: parameter documented (PR01), none unknown (PR02), in signature order (PR03), a Returns (RT01)
#: or Yields (YD01) section, and an Examples section (EX01).
OBJECT_CODES = frozenset({"GL08", "PR01", "PR02", "PR03", "RT01", "YD01", "EX01"})
#: The same on their public methods, whose use the class's example shows.
METHOD_CODES = OBJECT_CODES - {"EX01"}


def documented_imports() -> Iterator[tuple[str, str]]:
    """``(module, name)`` of each ``from streamfair... import name`` in the README's and docs' Python blocks."""
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in python_blocks(page):
            for node in ast.walk(ast.parse(block.code)):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
                    yield from ((node.module, alias.name) for alias in node.names)


def public_objects() -> dict[str, object]:
    """Each public class and function once, under the first name it is listed with."""
    listed = [(package, name) for package in PACKAGES for name in importlib.import_module(package).__all__]
    objects: dict[str, object] = {}
    for module, name in listed + list(documented_imports()):
        value = getattr(importlib.import_module(module), name)
        if (inspect.isclass(value) or inspect.isfunction(value)) and value not in objects.values():
            objects[f"{module}.{name}"] = value
    return objects


def members(obj: Any) -> Iterator[tuple[str, Any, frozenset[str]]]:
    """The object, then (for a class) each method and property it defines, with the codes checked on each."""
    path = f"{obj.__module__}.{obj.__qualname__}"
    yield path, obj, OBJECT_CODES
    if inspect.isclass(obj):
        for name, value in vars(obj).items():
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if name == "__init__" and inspect.isfunction(function):  # documented by the class: annotations only
                yield f"{path}.{name}", function, frozenset()
            elif inspect.isfunction(function) and not name.startswith("_"):
                yield f"{path}.{name}", function, METHOD_CODES
            elif isinstance(value, property) and not name.startswith("_"):
                yield f"{path}.{name}", value, frozenset({"GL08"})


def unannotated(function: Callable) -> list[str]:
    """Parameters (and ``return``) of ``function`` without a type hint."""
    signature = inspect.signature(function)
    missing = [
        name for name, parameter in signature.parameters.items()
        if name not in ("self", "cls") and parameter.annotation is inspect.Parameter.empty
    ]
    if function.__name__ != "__init__" and signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


OBJECTS = public_objects()


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_public_object_is_documented_and_annotated(name):
    problems = []
    for path, member, codes in members(OBJECTS[name]):
        if codes:
            problems += [f"{path}: {code} {message}" for code, message in validate(path)["errors"] if code in codes]
        if inspect.isfunction(member) and (missing := unannotated(member)):
            problems.append(f"{path}: not annotated: {', '.join(missing)}")
    assert not problems, "\n".join(problems)


def test_the_checks_can_fail():
    def undocumented(x):
        return x

    assert unannotated(undocumented) == ["x", "return"]
    # this module's helpers document neither their parameters nor their result, nor show an example
    assert {code for code, _ in validate("tests.test_public_api.unannotated")["errors"]} >= {"PR01", "RT01", "EX01"}
