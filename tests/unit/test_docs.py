"""What the README and the documentation site (``docs/**/*.md``) tell a reader is what the
code does: the README is page one and starts with ``make run`` / ``make test``; every ``make``
target, ``flywheel`` command and option, ``python -m`` module, setting, header, metric, alert,
repository path and dotted name the pages name exists; links stay inside the repository; the
alert rules' runbook links resolve to a page and an anchor. The generated references and the
build are test_docs_reference.py's; the helpers both read with, docs_helpers.py."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import yaml

from deployments import cli
from tests.unit.docs_helpers import (
    DOCS,
    PACKAGES,
    PAGES,
    README,
    ROOT,
    all_segments,
    code_text,
    hooks,
    slugs,
    subparsers,
    text_of,
)
from tests.unit.test_compose_env import settings_env_names

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
        elif isinstance(node, ast.ImportFrom | ast.Import) and any(
            (a.asname or a.name.split(".")[-1]) == name for a in node.names
        ):
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
