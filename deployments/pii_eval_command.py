"""``flywheel pii-eval FILE.jsonl``: the anonymiser on a labelled file, before trusting the
platform with one's traffic. Prints recall per type, every leak by line and type, the texts
without personal data that came back altered, and throughput. Leaked values are personal
data: they are printed only with ``--show-values`` (to the terminal, never to a log)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployments.output import FAILED, emit

if TYPE_CHECKING:
    from tasks.pii.evaluation import EvalReport


def add_args(p: argparse.ArgumentParser) -> None:
    """``FILE``, ``--language``, ``--fail-on-leak [structured|any]``, ``--show-values``."""
    p.add_argument("file", type=Path, help='JSONL: {"text": ..., "entities": [{"type", "value"}]}')
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
    """Evaluate the file; 1 with ``--fail-on-leak`` when something leaked."""
    report = evaluate_file(ns.file, ns.language)
    fields = report.summary(show_values=ns.show_values)
    if ns.json:
        emit(ns, "pii-eval", {"file": str(ns.file), **fields})
    else:
        print(_text(str(ns.file), fields))
    return exit_code(report, ns.fail_on_leak)


def evaluate_file(path: Path, language: str = "auto") -> EvalReport:
    """The configured anonymiser (built once per process) on the labelled file ``path``;
    ``language`` other than ``auto`` evaluates that language's pipeline alone."""
    from dataclasses import replace

    from infra.settings import get_settings
    from tasks.pii.engine import PiiConfig, load_engine
    from tasks.pii.evaluation import evaluate, load_labelled

    items = load_labelled(path)
    config = PiiConfig.from_settings(get_settings().curate)
    if language != "auto":
        models = dict(config.spacy_models)
        config = replace(
            config,
            languages=(language,),
            spacy_models=((language, models.get(language, "")),),
        )
    return evaluate(load_engine(config), items)


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
    lines.append(f"  throughput {f['texts_per_s']} texts/s, {f['chars_per_s']} chars/s")
    return "\n".join(lines)
