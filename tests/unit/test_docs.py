"""What the README and the documentation site (``docs/**/*.md``) tell a reader is what the
code does: the README is page one and starts with ``make run`` / ``make test``; every ``make``
target, ``flywheel`` command and option, ``python -m`` module, setting, header, metric, alert,
repository path and dotted name the pages name exists; links stay inside the repository; the
alert rules' runbook links resolve to a page and an anchor; the generated references cover
every setting, command and table; and ``mkdocs build --strict`` passes."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from deployments import cli
from tests.unit.test_compose_env import settings_env_names

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
PACKAGES = ("flows", "tasks", "infra", "deployments", "tests")
# variables read outside the settings object (each must be read somewhere in the code)
ENV_ONLY = {
    "FLYWHEEL_DEBUG",  # deployments/cli.py: tracebacks, as --debug
    "FLYWHEEL_VLLM_VENV",  # the vLLM environment `flywheel run --server vllm` starts
    "FLYWHEEL_TEST_KILL_AT",  # the fault suite's kill points
    "FLYWHEEL_TEST_BOOTSTRAP_CACHE",  # the tests' shared base models
    "FLYWHEEL_TEST_S3RVER_OBJECT_MIB",
    "FLYWHEEL_TEST_BIG_OBJECT_MIB",
    "FLYWHEEL_TEST_CPU_REPORT",  # tests/cpu_report.py: CPU seconds per test
    "FLYWHEEL_TEST_UI_SCREENSHOTS",  # tests/e2e/test_ui_browser.py: the docs' two pictures
}
OUTSIDE = re.compile(r"DESIGN|\.\./shared|shared folder|design article", re.I)


# ------------------------------------------------------------------------------- helpers


def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def code_segments(text: str) -> list[str]:
    """Every line of a fenced code block and every inline code span, where commands, paths
    and names are written."""
    segments: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        (segments if fenced else prose).append(line)
    for match in re.finditer(r"(`+)(.+?)\1", "\n".join(prose), re.S):
        segments.append(match.group(2).strip())
    return segments


def all_segments() -> list[tuple[str, str]]:
    """(page, code segment) for every page."""
    return [(str(p.relative_to(ROOT)), s) for p in PAGES for s in code_segments(text_of(p))]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each ``flywheel`` command."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@cache
def hooks() -> ModuleType:
    """docs/hooks.py, the generator of the reference pages."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_files() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    return [*files, ROOT / "Makefile", *(ROOT / "infra").rglob("*.yml")]


@cache
def code_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in code_files())


def slugs(page: Path) -> set[str]:
    """The anchors MkDocs gives the page's headings (toc's slugify; ``{#id}`` attributes)."""
    from markdown.extensions.toc import slugify

    found = set()
    fenced = False
    for line in text_of(page).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        heading = line.lstrip("#").strip()
        if explicit := re.search(r"\{#([\w-]+)\}\s*$", heading):
            found.add(explicit.group(1))
            continue
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        found.add(slugify(heading, "-"))
    return found


# ---------------------------------------------------------------------- the README, page one


def test_readme_starts_with_make_run_and_make_test() -> None:
    lines = [line for line in text_of(README).splitlines() if line.strip()]
    assert lines[0].startswith("# "), "the README's first line is its title"
    assert lines[1] == "```bash", "the first thing after the title is the commands' block"
    assert lines[2].startswith("make run ") and lines[3].startswith("make test "), lines[1:4]


def test_readme_is_one_page_that_links_into_the_docs() -> None:
    text = text_of(README)
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path = link.split("#")[0]
        assert "://" not in link and not link.startswith("/"), link
        target = (ROOT / path).resolve()
        assert target.is_relative_to(ROOT) and target.exists(), f"README links to {link}"


def test_pages_name_nothing_outside_the_repository() -> None:
    generated = {
        "configuration": hooks().configuration_page(),
        "cli": hooks().cli_page(),
        "storage": hooks().storage_page(),
    }
    texts = {str(p.relative_to(ROOT)): text_of(p) for p in PAGES} | generated
    for name, text in texts.items():
        assert not OUTSIDE.search(text), f"{name}: {OUTSIDE.search(text)}"
    for page in DOCS.rglob("*.md"):
        for link in re.findall(r"\]\(([^)\s]+)\)", text_of(page)):
            if "://" in link or link.startswith("#"):
                continue
            target = (page.parent / link.split("#")[0]).resolve()
            assert target.is_relative_to(DOCS), f"{page}: {link} leaves docs/"


# ---------------------------------------------------------- what the pages name exists


def test_every_make_target_named_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9_-]*):", makefile, re.M))
    named = {
        (page, m)
        for page, seg in all_segments()
        for m in re.findall(r"(?:^|[\s;(&|`])make ([a-z][a-z0-9-]*)", seg)
    }
    assert {m for _, m in named} >= {"run", "test", "lint", "docs", "bench", "vllm", "prove"}
    unknown = sorted((p, m) for p, m in named if m not in targets)
    assert not unknown, f"not Makefile targets: {unknown}"


def test_every_flywheel_command_and_option_named_exists() -> None:
    parser = cli.build_parser()
    commands = subparsers(parser)
    global_options = {o for a in parser._actions for o in a.option_strings}
    seen: set[str] = set()
    bad = []
    for page, seg in all_segments():
        line = re.split(r"\s#\s", seg)[0]
        for match in re.finditer(
            r"(?:^|[\s/`(])flywheel ((?:[a-z][a-z-]*)(?:\s*\|\s*[a-z][a-z-]*)*)", line
        ):
            names = [n.strip() for n in match.group(1).split("|")]
            unknown = [n for n in names if n not in commands]
            if unknown:
                bad.append((page, seg, unknown))
                continue
            seen |= set(names)
            # a command's own options and those of its actions (`flywheel keys create --x`)
            parsers = [commands[n] for n in names]
            parsers += [
                p
                for n in names
                if any(isinstance(a, argparse._SubParsersAction) for a in commands[n]._actions)
                for p in subparsers(commands[n]).values()
            ]
            options = global_options | {
                o for p in parsers for a in p._actions for o in a.option_strings
            }
            rest = re.split(r"\bflywheel ", line[match.end() :])[0]  # up to the next command
            bad += [(page, seg, o) for o in re.findall(r"--[a-z][a-z-]*", rest) if o not in options]
    assert not bad, f"not flywheel commands or options: {bad}"
    assert seen == {c.name for c in cli.COMMANDS}, "every command is named on some page"


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _defines(module: Path, name: str) -> bool:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, ast.ImportFrom | ast.Import):
            if any((a.asname or a.name.split(".")[-1]) == name for a in node.names):
                return True
    return False


def test_every_module_and_dotted_name_exists() -> None:
    bad = []
    for page, seg in all_segments():
        for module in re.findall(r"python -m ([\w.]+)", seg):
            if module.split(".")[0] in PACKAGES and not (
                _module_file(module) or (ROOT.joinpath(*module.split(".")) / "__main__.py").exists()
            ):
                bad.append((page, module))
        pattern = rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(?::(\w+))?"
        for dotted, attr in re.findall(pattern, seg):
            parts = dotted.split(".")
            cut = next(
                (i for i in range(len(parts), 0, -1) if _module_file(".".join(parts[:i]))), 0
            )
            names = parts[cut:] + ([attr] if attr else [])
            file = _module_file(".".join(parts[:cut])) if cut else None
            if file is None or len(names) > 1 or (names and not _defines(file, names[0])):
                bad.append((page, f"{dotted}:{attr}" if attr else dotted))
    assert not bad, f"not modules or names of this repository: {bad}"


def test_every_repository_path_named_exists() -> None:
    roots = (*(f"{p}/" for p in PACKAGES), "golden/", "docs/", ".ci/")
    bad = []
    for page, seg in all_segments():
        for token in re.findall(r"(?<![\w./-])([.\w][\w./*-]*)", seg):
            if not token.startswith(roots):
                continue
            path = token.rstrip(".,;:")
            if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                bad.append((page, path))
    assert not bad, f"paths that do not exist: {bad}"


def test_every_setting_named_is_one_the_code_reads() -> None:
    known = settings_env_names()
    bad = []
    for page in PAGES:
        for token in re.findall(r"FLYWHEEL_[A-Z0-9_]*\*?", text_of(page)):
            if token in known or token in ENV_ONLY:
                continue
            stem = token.rstrip("*")
            if token.endswith(("*", "_")) and any(k.startswith(stem) for k in known):
                continue  # a prefix: FLYWHEEL_REWARD__W_*, FLYWHEEL_<SECTION>__<FIELD>
            bad.append((str(page.relative_to(ROOT)), token))
    assert not bad, f"not fields of infra.settings.Settings: {bad}"
    unread = sorted(v for v in ENV_ONLY if v not in code_text())
    assert not unread, f"named but read nowhere: {unread}"
    fields = {k.rpartition("__")[2] for k in known if "__" in k}
    short = {
        (page, m)
        for page, seg in all_segments()
        for m in re.findall(r"(?<![A-Z0-9_])__([A-Z][A-Z0-9_]*[A-Z0-9])(?![A-Z0-9_])", seg)
    }
    bad_short = sorted(s for s in short if s[1] not in fields)
    assert not bad_short, f"__FIELD names no section's field: {bad_short}"


def test_every_header_named_is_one_the_code_reads() -> None:
    code = code_text().lower()
    headers = {h for p in PAGES for h in re.findall(r"\bX-[A-Za-z][A-Za-z-]*", text_of(p))}
    assert {"X-Flywheel-Workload", "X-Trace-Id", "X-Session-Id"} <= headers
    assert not sorted(h for h in headers if h.lower() not in code)


def test_every_metric_named_is_one_the_code_exports() -> None:
    code = code_text()
    named = {
        (page, m)
        for page, seg in all_segments()
        for m in re.findall(r"\b((?:flywheel|agent|user_feedback)_[a-z0-9_]*[a-z0-9])\b", seg)
    }
    assert len(named) > 30
    assert not sorted((p, m) for p, m in named if m not in code)


def test_every_alert_is_documented_and_every_documented_alert_exists() -> None:
    rules = yaml.safe_load((ROOT / "infra/prometheus/rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    table = text_of(DOCS / "operating/monitoring.md").split("## Alerts", 1)[1]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert listed == alerts
    for page in PAGES:  # an alert named anywhere is a real one
        text = text_of(page)
        named = set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][a-z0-9]+)+)`", text))
        suffixes = ("Regression", "Feedback", "Down", "Dropping", "Stale", "Failing", "Missing")
        suffixes += ("Low", "High", "Disagreement", "Correlation", "Collapse", "Near", "Failed")
        near = {n for n in named if n.endswith(suffixes)}
        assert near <= alerts, (page, near - alerts)


def test_alert_runbook_links_resolve_to_a_page_and_an_anchor() -> None:
    rules = yaml.safe_load((ROOT / "infra/prometheus/rules.yml").read_text())
    links = [
        (r["alert"], r["annotations"]["runbook"])
        for g in rules["groups"]
        for r in g["rules"]
        if "runbook" in r.get("annotations", {})
    ]
    assert len(links) >= 8
    for alert, link in links:
        path, _, anchor = link.partition("#")
        page = ROOT / path
        assert path.startswith("docs/") and page.exists(), (alert, link)
        assert anchor in slugs(page), (alert, link, sorted(slugs(page)))


def test_every_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def files(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [f for item in nav for f in files(item)]
        if isinstance(nav, dict):
            return [f for value in nav.values() for f in files(value)]
        return []

    in_nav = set(files(config["nav"]))
    written = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert in_nav == written | set(hooks().GENERATED)
    assert not written & set(hooks().GENERATED), "generated pages are never committed"


# --------------------------------------------------------------- the generated references


def test_configuration_reference_lists_every_setting() -> None:
    page = hooks().configuration_page()
    missing = sorted(n for n in settings_env_names() if not n.endswith("*") and n not in page)
    assert not missing
    rows = hooks().settings_rows()
    by_env = {row["env"]: row for row in rows}
    port = by_env["FLYWHEEL_GATEWAY__PORT"]
    assert (port["type"], port["default"]) == ("int (≥ 0, ≤ 65535)", "8088")
    assert by_env["FLYWHEEL_GATEWAY__MAX_BODY_BYTES"]["description"] == "larger requests get 413"
    assert by_env["FLYWHEEL_CONSENT_MODE"]["description"].startswith("PIPA")
    assert by_env["FLYWHEEL_S3_ACCESS_KEY_ID / AWS_ACCESS_KEY_ID"]["default"] == "unset"


def test_cli_reference_lists_every_command_and_option() -> None:
    page = hooks().cli_page()
    parser = cli.build_parser()
    for cmd in cli.COMMANDS:
        assert f"## flywheel {cmd.name} " in page
    for sub in subparsers(parser).values():
        for action in sub._actions:
            for option in action.option_strings if action.dest != "help" else ():
                assert f"`{option}" in page or f", {option}" in page, (sub.prog, option)


def test_storage_reference_lists_every_table_and_key() -> None:
    from infra import catalog_schemas, keys

    page = hooks().storage_page()
    for table, schema in catalog_schemas.SCHEMAS.items():
        assert f"### flywheel.{table}" in page
        assert all(f"`{f.name}`" in page for f in schema)
    prefixes = [v for k, v in vars(keys).items() if k.endswith(("_PREFIX", "_KEY"))]
    assert prefixes and all(p in page for p in prefixes)


def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "reference/configuration/index.html").exists()
