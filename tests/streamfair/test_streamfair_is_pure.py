"""``streamfair/`` is maths only: no I/O, no connectors, no wall clock, no global random state.

Every module's syntax tree is read (nothing is imported or run): imports of the modules below, calls
of the built-ins below, numpy's file functions and numpy's global random state are violations.  The
checker is tested on bad sources too, so that it can fail.

The pure tests (``tests/streamfair``) need only the ``test`` extra, as CONTRIBUTING.md says: the packages
they import, followed through the first-party modules they import, are checked against it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE = REPO / "streamfair"
#: top-level modules streamfair must not import: the adapters, networking, processes, files, formats, clocks
FORBIDDEN_MODULES = {
    "connectors", "kafka", "river", "prometheus_client", "requests", "socket", "ssl", "http", "urllib", "asyncio",
    "subprocess", "multiprocessing", "threading", "os", "sys", "io", "pathlib", "shutil", "tempfile", "glob",
    "json", "csv", "sqlite3", "logging", "time", "datetime", "random", "matplotlib", "pandas",
}
#: file functions of modules whose in-memory forms are fine (``pickle.dumps`` in a round-trip check)
FORBIDDEN_FUNCTIONS = {"pickle.load", "pickle.dump"}
#: built-ins that do I/O or run code
FORBIDDEN_CALLS = {"open", "print", "input", "breakpoint", "exec", "eval", "__import__"}
#: numpy's file functions (``np.<name>``) and array methods that write files
FORBIDDEN_NUMPY = {"save", "savez", "savez_compressed", "load", "loadtxt", "savetxt", "genfromtxt", "fromfile",
                   "tofile", "memmap"}
#: the only ``np.random.<name>`` allowed: explicit generators, never the global state
ALLOWED_NUMPY_RANDOM = {"default_rng", "Generator", "SeedSequence", "PCG64", "BitGenerator"}


def _dotted(node: ast.AST) -> str:
    """``np.random.seed`` for the expression ``np.random.seed``; ``""`` for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def violations(source: str, name: str = "<module>") -> list[str]:
    """What in ``source`` breaks the rules, as ``"name:line: reason"`` strings."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            modules = []
        found += [f"{where}: imports {module}" for module in modules if module.split(".")[0] in FORBIDDEN_MODULES]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{where}: calls {node.func.id}()")
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else ""
        head, _, attribute = dotted.rpartition(".")
        if head in ("np", "numpy") and attribute in FORBIDDEN_NUMPY:
            found.append(f"{where}: uses {dotted}")
        if dotted in FORBIDDEN_FUNCTIONS:
            found.append(f"{where}: uses {dotted}")
        if isinstance(node, ast.Attribute) and node.attr == "tofile":
            found.append(f"{where}: writes a file (.tofile)")
        if head in ("np.random", "numpy.random") and attribute not in ALLOWED_NUMPY_RANDOM:
            found.append(f"{where}: uses numpy's global random state ({dotted})")
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_checked():
    assert len(MODULES) >= 40 and PACKAGE / "dro" / "solvers.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_module_has_no_io_and_no_connector_imports(path: Path):
    assert violations(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix()) == []


@pytest.mark.parametrize("source, reason", [
    ("import socket", "imports socket"),
    ("import os.path", "imports os.path"),
    ("from connectors.kafka import daemon", "imports connectors.kafka"),
    ("from urllib.request import urlopen", "imports urllib.request"),
    ("import numpy as np, subprocess", "imports subprocess"),
    ("with open('x') as f: pass", "calls open()"),
    ("def f(x):\n    print(x)", "calls print()"),
    ("np.save('x.npy', a)", "uses np.save"),
    ("a.tofile('x.bin')", "writes a file (.tofile)"),
    ("pickle.dump(state, f)", "uses pickle.dump"),
    ("np.random.seed(0)", "uses numpy's global random state (np.random.seed)"),
    ("x = np.random.rand(3)", "uses numpy's global random state (np.random.rand)"),
])
def test_the_checker_finds_each_kind_of_violation(source, reason):
    assert [v.split(": ", 1)[1] for v in violations(source)] == [reason]


def test_the_checker_accepts_maths_and_relative_imports():
    source = ("from __future__ import annotations\nimport math\nimport numpy as np\nfrom . import dual\n"
              "from ..validation import check_tau\nrng = np.random.default_rng(0)\nsaved = model.save_state()\n"
              "import pickle\ncopy = pickle.loads(pickle.dumps(model))\n")
    assert violations(source) == []



#: what the pure tests may import: they run with the ``test`` extra alone (CONTRIBUTING.md, "Supported versions")
TEST_EXTRA = {"numpy", "numba", "scipy", "sklearn", "pytest", "xdist", "hypothesis", "yaml", "numpydoc"}
FIRST_PARTY = {"streamfair", "connectors", "tests"}
PURE_TESTS = sorted((REPO / "tests" / "streamfair").rglob("*.py"))


def imported_packages(path: Path, seen: set[Path] | None = None) -> set[str]:
    """The top-level packages that running ``path`` imports: anywhere in ``path`` itself (a test runs its function
    bodies), and at import time in the first-party modules it imports, followed (``seen``: those already read)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if seen is None else iter(tree.body)
    seen = (seen or set()) | {path}
    modules: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)  # a submodule, perhaps
    packages = {module.split(".")[0] for module in modules}
    for module in sorted(m for m in modules if m.split(".")[0] in FIRST_PARTY):
        for source in (REPO / (module.replace(".", "/") + ".py"), REPO / module.replace(".", "/") / "__init__.py"):
            if source.is_file() and source not in seen:
                seen.add(source)
                packages |= imported_packages(source, seen)
    return packages


@pytest.mark.parametrize("path", PURE_TESTS, ids=lambda path: path.relative_to(REPO).as_posix())
def test_the_pure_tests_need_only_the_test_extra(path: Path):
    allowed = TEST_EXTRA | FIRST_PARTY | set(sys.stdlib_module_names) | {"__future__"}
    assert sorted(imported_packages(path) - allowed) == []


def test_the_import_finder_follows_first_party_modules():
    assert "river" in imported_packages(REPO / "tests" / "connectors" / "river" / "test_surrogates_river_validation.py")
    assert "kafka" in imported_packages(REPO / "tests" / "connectors" / "kafka" / "test_sender.py")
