"""README, patches.md and the patch modules' docstrings agree with the patch registry (the home of each patch's
releases, flag and upstream reference: docs/dev/API.md), every file they name exists, and CI runs README's command."""

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest
from packaging.version import Version

import graphfix.cli as cli
from graphfix.cli import matrix
from graphfix.registry import ENGINE_PACKAGES, REGISTRY

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


# ---------------------------------------------------------------- one source for each fact
# Homes (docs/dev/API.md, "Where each fact lives"): the Patch fields hold affected releases, first fixed
# release, flag, opt-in and upstream reference; patches.md holds explanations, evidence and measurements;
# a patch module's docstring is a one-screen summary in the Patch fields' words. The tests below check the
# docstrings and patches.md against the Patch fields, and every file reference against the tree.

VERSION = re.compile(r"(?<![\w.])\d+\.\d+(?:\.\d+)?(?:\.post\d+)?(?![\w])")
MEASUREMENT = re.compile(r"\b[KMGT]i?B\b|%|\d\s*ms\b|\bmeasured\b")


def patch_modules():
    """{patch id: (path, docstring)} of every patch module (scenarios/ are not patch modules)."""
    out = {}
    for p in REGISTRY.load():
        package = ENGINE_PACKAGES[p.engine]
        path = ROOT / package / f"{p.id.split('.', 1)[1]}.py"
        out[p.id] = path, ast.get_docstring(ast.parse(path.read_text())) or ""
    return out


def harness_releases(p):
    """The releases the harness builds that lie in the patch's range, before its first fixed release."""
    from harness.engines import RELEASES

    return [v for v in RELEASES[p.engine]
            if p.specifier.contains(v, prereleases=True) and Version(v) < Version(p.fixed_in)]


def line(doc, label):
    found = [ln for ln in doc.splitlines() if ln.startswith(f"{label}: ")]
    assert len(found) == 1, f"one line starting with {label!r} expected"
    return found[0]


def upstream_refs(p):
    """The references the upstream field names (seed NNN, PR/issue numbers), each to be found elsewhere."""
    return re.findall(r"seed \d{3}|\b\d{5}\b", p.upstream)


def test_every_patch_module_is_registered_once():
    registered = {f"{ENGINE_PACKAGES[p.engine]}/{p.id.split('.', 1)[1]}.py" for p in REGISTRY.load()}
    on_disk = {f"{pkg}/{f.name}" for pkg in ENGINE_PACKAGES.values() for f in (ROOT / pkg).glob("*.py")
               if not f.name.startswith("_")}  # private helper modules are no patch modules
    assert registered == on_disk


def test_patch_module_docstring_is_a_screen_in_the_patch_fields_words():
    for p in REGISTRY.load():
        path, doc = patch_modules()[p.id]
        where = f"{path.relative_to(ROOT)} docstring"
        assert doc.splitlines()[0] == f"{p.id} \u2014 {p.summary}.", (where, "first line = id \u2014 summary.")
        assert len(doc.splitlines()) <= 18, (where, "more than a screen: details belong in patches.md")
        for label in ("Symptom", "Upstream fix", "Wrapper"):
            assert line(doc, label), (where, label)
        affected = line(doc, "Affected")
        assert f"``{p.affected}``" in affected, (where, affected, p.affected)
        assert f"Fixed in: {p.fixed_in}." in affected, (where, affected, p.fixed_in)
        named = VERSION.findall(affected.replace(p.affected, ""))
        stray = [v for v in named if v != p.fixed_in and not p.specifier.contains(v, prereleases=True)]
        assert not stray, (where, "releases named as affected outside the range", stray)
        flag = line(doc, "Flag")
        assert flag.startswith(f"Flag: ``{p.flag}``"), (where, flag)
        assert ("opt-in" in flag) == (p.default == "off"), (where, "opt-in exactly when Patch(default='off')")
        for ref in upstream_refs(p):
            assert ref in line(doc, "Upstream fix"), (where, "Upstream fix line lacks", ref)
        assert "patches.md" in doc, (where, "points to patches.md for the details")


def test_no_measurements_in_patch_module_docstrings():
    for p in REGISTRY.load():
        path = patch_modules()[p.id][0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                assert not MEASUREMENT.search(doc), (path.name, getattr(node, "name", "module"),
                                                     MEASUREMENT.search(doc).group(0),
                                                     "measurements belong in patches.md / docs/benchmarks.md")


def patches_md_sections():
    text = (ROOT / "patches.md").read_text()
    return dict(re.findall(r"^## `([\w.]+)`\n(.*?)(?=^## |\Z)", text, re.S | re.M))


def paragraph(body, heading):
    m = re.search(rf"^\*\*{heading}\.\*\* (.*?)(?=\n\n|\Z)", body, re.S | re.M)
    assert m, heading
    return " ".join(m.group(1).split())


def test_patches_md_affected_and_flag_agree_with_the_patch_fields():
    sections = patches_md_sections()
    for p in REGISTRY.load():
        affected = paragraph(sections[p.id], "Affected releases")
        m = re.match(rf"`{re.escape(p.affected)}`(?:: (\d+(?:\.\w+)+(?:, \d+(?:\.\w+)+)*))?", affected)
        assert m, (p.id, "**Affected releases.** starts with the specifier", affected[:80])
        listed = m.group(1).split(", ") if m.group(1) else []
        assert listed == harness_releases(p), (p.id, "releases listed after the specifier", listed)
        assert f"First fixed: {p.fixed_in}" in affected, (p.id, affected)
        flag = paragraph(sections[p.id], "Flag")
        assert flag.startswith(f"`{p.flag}`"), (p.id, flag)
        if p.default == "off":
            assert "opt-in" in flag and "`auto` (default) and `off` leave it off" in flag, (p.id, flag)
        else:
            assert "`auto` (default) | `on` | `off`" in flag, (p.id, flag)
        for ref in upstream_refs(p):
            assert ref in paragraph(sections[p.id], "Upstream fix"), (p.id, "Upstream fix lacks", ref)


def test_readme_names_exactly_the_opt_in_patches():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"Opt-in patches \((.*?)\)", readme, re.S)
    assert m, "README Flags section names the opt-in patches"
    assert set(re.findall(r"`([\w.]+)`", m.group(1))) == {p.id for p in REGISTRY.load() if p.default == "off"}


# A file path: dir/.../name.ext or a bare NAME.md; not part of a longer word, URL or placeholder
# (`<engine>_graphfix/...`, `$OUT/...`, `.../sglang/...`).
EXT = r"(?:py|md|sh|png|json|jsonl|log|cfg|toml|txt)"
REPO_PATH = re.compile(rf"(?<![\w./$~<>*-])((?:\.\./)?(?:[\w.-]+/)+[\w.-]*\.{EXT}|[\w.-]+\.md)(?![\w/(<*])")


def _prose_and_code(text):
    """(prose, code) of a Markdown text: fenced and indented blocks are code."""
    prose, code, fence = [], [], False
    for ln in text.splitlines():
        if ln.lstrip().startswith("```"):
            fence = not fence
            continue
        (code if fence or ln.startswith(("    ", "\t")) else prose).append(ln)
    return "\n".join(prose), "\n".join(code)


def paths_in(text, code=False):
    """The file paths ``text`` names; in code (commands may name files they create) only those that start
    with a top-level entry of the repository."""
    top = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}  # not .gpu/, .venv/ (local, ignored)
    refs = REPO_PATH.findall(re.sub(r"https?://\S+", "", text))
    return [r for r in refs if not r.startswith(".../") and (not code or r.split("/")[0] in top)]


def referenced_paths():
    """(source file, path) for README.md, patches.md, docs/**/*.md, harness/README.md and the module
    docstrings of graphfix/ and the patch packages (their scenarios/ included)."""
    for md in [ROOT / "README.md", ROOT / "patches.md", ROOT / "harness" / "README.md",
               *sorted((ROOT / "docs").rglob("*.md"))]:
        prose, code = _prose_and_code(md.read_text())
        yield from ((md, ref) for ref in paths_in(prose) + paths_in(code, code=True))
    for pkg in ("graphfix", *ENGINE_PACKAGES.values()):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            yield from ((f, ref) for ref in paths_in(ast.get_docstring(ast.parse(f.read_text())) or ""))


def test_referenced_files_exist():
    missing = [(str(src.relative_to(ROOT)), ref) for src, ref in referenced_paths()
               if not ((ROOT / ref).exists() or (src.parent / ref).exists())]
    assert not missing, f"references to files that do not exist: {missing}"


def test_reference_scan_finds_references():
    sample = ("See ENGINES.md, docs/dev/patches-vllm.spec_prefill_metadata.md and [x](../benchmarks/a.json); "
              "not $OUT/graph.json, <engine>_graphfix/scenarios/<name>.py, .../sglang/srt/x.py or "
              "https://github.com/o/r/blob/main/y.py")
    assert paths_in(sample) == ["ENGINES.md", "docs/dev/patches-vllm.spec_prefill_metadata.md", "../benchmarks/a.json"]
    assert paths_in("bash scripts/demo.sh; cat .gpu/bin/device.sh", code=True) == ["scripts/demo.sh"]
    refs = {ref for _, ref in referenced_paths()}
    assert {"patches.md", "scripts/demo.sh", "docs/benchmarks.md"} <= refs


def test_cli_docstring_names_every_subcommand():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["--help"])
    commands = re.search(r"\{([\w,]+)\}", out.getvalue()).group(1).split(",")
    assert set(commands) >= {"status", "verify", "matrix"}
    for command in commands:
        assert f"``{command}``" in cli.__doc__, command
