"""Every ```python block of README.md and docs/*.md runs and every configuration loads: the docs cannot rot.

The blocks of one page run in order in one namespace (a later block may use what an earlier one
defined), in a temporary working directory.  A block that needs a Kafka broker uses the name
``BOOTSTRAP``: it is then the address of the test broker (the ``kafka_broker`` fixture).  A block
fenced as ```python no-run (it needs your own cluster or a package the tests do not install) is
compiled, not run; there must be few.  docs/own-model.md runs end to end in tests/test_own_model.py.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from connectors.kafka.config import load_config
from tests.support import REPO
from tests.support.docs_blocks import NO_RUN, python_blocks, run_blocks
from tests.support.jargon import JARGON

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: run by its own end-to-end test (it needs the daemon between its blocks)
OWN_MODEL = REPO / "docs" / "own-model.md"


def page_param(page: Path):
    """The page as a test parameter, marked ``kafka`` when its blocks use the test broker."""
    needs_broker = any("BOOTSTRAP" in block.code for block in python_blocks(page))
    return pytest.param(page, marks=[pytest.mark.kafka] if needs_broker else [], id=str(page.relative_to(REPO)))


@pytest.mark.slow
@pytest.mark.parametrize("page", [page_param(p) for p in PAGES if p != OWN_MODEL])
def test_code_blocks_run(page, tmp_path, monkeypatch, request):
    blocks = python_blocks(page)
    namespace = {"__name__": "__main__"}
    if any("BOOTSTRAP" in block.code for block in blocks):
        namespace["BOOTSTRAP"] = request.getfixturevalue("kafka_broker").bootstrap
    monkeypatch.chdir(tmp_path)
    run_blocks(blocks, namespace)


def test_fences_are_python_or_python_no_run_and_no_run_is_rare():
    blocks = [block for page in PAGES for block in python_blocks(page)]
    assert {block.info for block in blocks} <= {"", NO_RUN}
    assert len(blocks) >= 15  # the fence pattern finds them (indented ones too)
    assert sum(not block.runs for block in blocks) <= 4


def test_user_facing_pages_have_no_internal_jargon_or_local_paths():
    for page in [*PAGES, REPO / "CONTRIBUTING.md"]:
        text = page.read_text(encoding="utf-8")
        assert not JARGON.search(text), f"{page.name}: {JARGON.search(text).group(0)!r}"
        assert not re.search(r"(?<![\w.])/(work|tmp|root|home)/", text), page.name


#: the settings that name files: a test gives each one a file of its own
FILE_SETTINGS = (("models", "eta"), ("models", "tau"), ("kafka", "ssl_cafile"), ("kafka", "ssl_certfile"),
                 ("kafka", "ssl_keyfile"))
TOML_FENCE = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def test_configuration_examples_load_and_state_the_fairness_target_in_ks(tmp_path):
    """Each ```toml block that is a whole file (it has a table) is a valid daemon configuration.

    Its file settings point to files made here, the SASL password comes from the environment (as
    the example says). A regression example states its target as ``ks``, the KS distance the
    dashboards show, not the paper's per-atom ``eps``.
    """
    examples = [(page, block) for page in PAGES for block in TOML_FENCE.findall(page.read_text(encoding="utf-8"))
                if re.search(r"^\[\w+\]", block, re.M)]
    assert len(examples) >= 4
    for number, (page, block) in enumerate(examples):
        path = tmp_path / f"example-{number}.toml"
        path.write_text(block, encoding="utf-8")
        tables = tomllib.loads(block)
        overrides = [f"{table}.{name}={tmp_path / Path(tables[table][name]).name}"
                     for table, name in FILE_SETTINGS if name in tables.get(table, {})]
        for override in overrides:
            Path(override.partition("=")[2]).touch()
        sasl = "sasl_mechanism" in tables.get("kafka", {})
        env = {"STREAMFAIR_KAFKA_SASL_PASSWORD": "secret"} if sasl else {}
        config = load_config(path, env=env, overrides=overrides)
        params = config.postprocessor.build().get_params()
        if config.postprocessor.kind == "regression":
            assert params.get("ks") is not None and params.get("eps") is None, f"{page.name}: {block}"
