"""README and patches.md must agree with the patch registry and with what CI runs."""

import re
from pathlib import Path

from graphfix.cli import matrix
from graphfix.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]


def block(text, name):
    m = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
    assert m, f"README has no {name} block"
    return m.group(1).strip()


def test_readme_matrix_is_generated_from_the_registry():
    assert block((ROOT / "README.md").read_text(), "matrix") == matrix()


def test_patches_md_has_one_section_per_patch():
    text = (ROOT / "patches.md").read_text()
    sections = dict(re.findall(r"^## `([\w.]+)`\n(.*?)(?=^## |\Z)", text, re.S | re.M))
    patches = REGISTRY.load()
    assert set(sections) == {p.id for p in patches}
    for p in patches:
        body = sections[p.id]
        assert p.flag in body and p.fixed_in in body, p.id
        for heading in ("Symptom", "Upstream fix", "Affected releases", "Wrapper", "Flag", "Retirement"):
            assert f"**{heading}" in body, (p.id, heading)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "    bash scripts/test.sh" in readme and "    bash scripts/demo.sh" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci/run").read_text()


def test_version_has_one_home_and_readme_install_lines_name_the_wheel():
    import graphfix

    setup = (ROOT / "setup.cfg").read_text()
    assert "version = attr: graphfix.__version__" in setup
    assert not re.search(r"^version\s*=\s*\d", setup, re.M)
    readme = (ROOT / "README.md").read_text()
    wheel = f"graphfix-{graphfix.__version__}-py3-none-any.whl"
    assert f"pip install dist/{wheel}" in readme
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
