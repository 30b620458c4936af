"""``flywheel pii-eval FILE.jsonl [--clean CLEAN.jsonl]``: the anonymiser on a labelled file,
before trusting the platform with one's traffic. Prints recall per type, every leak by line
and type, the texts without personal data that came back altered, precision per type (which
types fired on the ``--clean`` texts, and how often) and throughput. Labels may use
Presidio's entity names; other types are measured as identifiers that must not survive.
Leaked values are personal data: they are printed only with ``--show-values`` (to the
terminal, never to a log). A sealed held-out set (a ``SEALED`` file beside it) is reported in
totals only, ``--show-values`` or not."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployments.output import FAILED, emit
from infra.errors import ConfigError

if TYPE_CHECKING:
    from tasks.pii.evaluation import EvalReport


def add_args(p: argparse.ArgumentParser) -> None:
    """``FILE``, ``--clean FILE``, ``--language``, ``--fail-on-leak [structured|any]``,
    ``--show-values``."""
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help='JSONL: {"text": ..., "entities": [{"type", "value"}]} (types: ours, Presidio\'s, '
        "or any other, measured as an identifier)",
    )
    p.add_argument(
        "--clean",
        type=Path,
        metavar="FILE",
        default=None,
        help='JSONL of texts without personal data ({"text": ...}): precision per type, '
        "which types fired on them and how often",
    )
    p.add_argument(
        "--language",
        choices=["auto", "en", "ko"],
        default="auto",
        help="auto: every configured language where it applies (FLYWHEEL_CURATE__LANGUAGES)",
    )
    p.add_argument(
        "--fail-on-leak",
        nargs="?",
        const="any",
        choices=["any", "structured"],
        default=None,
        help="exit 1 when a value leaks (structured: only identifiers, not names/addresses)",
    )
    p.add_argument(
        "--show-values",
        action="store_true",
        help="print each leaked value (personal data: keep it out of CI logs)",
    )


def run(ns: argparse.Namespace) -> int:
    """Evaluate the file(s); 1 with ``--fail-on-leak`` when something leaked."""
    if ns.file is None and ns.clean is None:
        raise ConfigError("pii-eval needs a labelled FILE, a --clean FILE, or both")
    report = evaluate_file(ns.file, ns.language, clean=ns.clean)
    fields = report.summary(show_values=ns.show_values)
    names = {"file": str(ns.file) if ns.file else None, "clean": str(ns.clean or "") or None}
    if ns.json:
        emit(ns, "pii-eval", {**names, **fields})
    else:
        print(_text(" + ".join(str(p) for p in (ns.file, ns.clean) if p), fields))
    return exit_code(report, ns.fail_on_leak)


def evaluate_file(
    path: Path | None, language: str = "auto", *, clean: Path | None = None
) -> EvalReport:
    """The configured anonymiser (built once per process) on the labelled file ``path`` and
    the texts without personal data of ``clean``; ``language`` other than ``auto`` evaluates
    that language's pipeline alone."""
    from dataclasses import replace

    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, load_engine
    from tasks.pii.evaluation import evaluate, is_sealed, load_clean, load_labelled

    items = load_labelled(path) if path is not None else []
    clean_items = load_clean(clean) if clean is not None else []
    config = PiiConfig.from_settings(get_settings().curate)
    if language != "auto":
        models = dict(config.spacy_models)
        config = replace(
            config,
            languages=(language,),
            spacy_models=((language, models.get(language, "")),),
        )
    report = evaluate(load_engine(config), items, clean_items)
    report.sealed = any(p is not None and is_sealed(p) for p in (path, clean))
    return report


def exit_code(report: EvalReport, fail_on_leak: str | None) -> int:
    """``--fail-on-leak``'s verdict: 1 when a value it counts leaked (``structured``: only
    identifiers), else 0; always 0 without the flag."""
    leaked = report.structured_leaks if fail_on_leak == "structured" else len(report.leaks)
    return FAILED if fail_on_leak and leaked else 0


def _text(path: str, f: dict[str, Any]) -> str:
    lines = [f"pii-eval {path}: {f['lines']} texts, {f['values']} labelled values"]
    for etype, recall in f["recall_by_type"].items():
        lines.append(f"  recall {etype:<15} {recall:.3f}")
    lines.append(f"  leaks {f['leaks']} ({f['structured_leaks']} structured identifiers)")
    for etype, n in f.get("leaks_by_type", {}).items():
        lines.append(f"    {etype:<15} {n} (sealed set: totals only)")
    for leak in f["leaked"]:
        value = f"  {leak['value']}" if "value" in leak else ""
        lines.append(f"    line {leak['line']:>5}  {leak['type']}{value}")
    for conf in f["type_confusions"]:
        lines.append(f"  {conf['type']} replaced as {conf['replaced_as']}: {conf['count']}")
    rate = f["clean_altered_rate"]
    lines.append(
        f"  texts without personal data altered: {f['clean_altered']} of {f['clean_texts']}"
        + (f" ({rate:.1%})" if rate is not None else "")
    )
    if f["clean_altered_lines"]:
        lines.append("    lines " + ", ".join(str(n) for n in f["clean_altered_lines"]))
    for theirs, ours in f["label_types_mapped"].items():
        lines.append(f"  label {theirs} counted as {ours}")
    if f["measured_as_identifier"]:
        lines.append(
            "  measured as identifiers that must not survive: "
            + ", ".join(f["measured_as_identifier"])
        )
    if f["clean_file_texts"]:
        altered = f["clean_file_altered_lines"]
        count = f.get("clean_file_altered", len(altered))
        lines.append(
            f"  --clean: {count} of {f['clean_file_texts']} texts altered"
            + (f" (lines {', '.join(map(str, altered))})" if altered else "")
        )
    for etype, fired in f["clean_fired_by_type"].items():
        lines.append(
            f"  fired on clean text {etype:<15} {fired['findings']} times in {fired['texts']} texts"
        )
    for etype, precision in f["precision_by_type"].items():
        lines.append(f"  precision {etype:<12} {precision:.3f}")
    lines.append(f"  throughput {f['texts_per_s']} texts/s, {f['chars_per_s']} chars/s")
    return "\n".join(lines)
