"""The arguments of each ``flywheel`` command (one function per command, used by the command
table in ``deployments/cli.py``) and the values checked at parse time."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from deployments.argtypes import model_version, whole_number, workload
from infra.keys import parse_window_start, window_id
from infra.parameters import LOOP_REQUESTS, MAX_HOURS

# ------------------------------------------------------------- values checked at parse time


def iso_hour(value: str) -> str:
    """A window start: an ISO date-time on the hour, not after the current hour."""
    example = "e.g. 2026-11-22T10:00:00Z"
    try:
        start = parse_window_start(value)
    except ValueError as exc:
        reason = str(exc) if "hour boundary" not in str(exc) else "not on the hour"
        if reason.startswith("Invalid isoformat string"):
            reason = "not an ISO date-time"
        raise argparse.ArgumentTypeError(f"{value!r}: {reason} ({example})") from None
    if start > datetime.now(UTC):
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        raise argparse.ArgumentTypeError(
            f"{value!r} has not started yet (the current hour is {window_id(hour)})"
        )
    return window_id(start)


def non_empty(value: str) -> str:
    """A value that is not blank."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


# ------------------------------------------------------------------- arguments per command


def no_args(p: argparse.ArgumentParser) -> None:
    """No arguments."""


def window_args(p: argparse.ArgumentParser) -> None:
    """A stage window: its start hour and its length in hours."""
    p.add_argument(
        "--window-start",
        type=iso_hour,
        help="ISO hour, e.g. 2026-11-22T10:00:00Z (default: last closed hour)",
    )
    p.add_argument(
        "--hours",
        type=whole_number(1, MAX_HOURS),
        default=1,
        help=f"window length in hours, 1-{MAX_HOURS} (default 1)",
    )


def curate_args(p: argparse.ArgumentParser) -> None:
    """The window curate reads (one hour)."""
    p.add_argument("--window-start", type=iso_hour, help="ISO hour (default: last closed hour)")


def bootstrap_args(p: argparse.ArgumentParser) -> None:
    """Seed and rebuild of the demo base model."""
    p.add_argument("--seed", type=whole_number(0), default=0, help="pre-training seed (default 0)")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


def simulate_args(p: argparse.ArgumentParser) -> None:
    """How many simulated requests, how fast, where to."""
    p.add_argument(
        "--requests", type=whole_number(1), default=500, help="requests to send (default 500)"
    )
    p.add_argument(
        "--concurrency",
        type=whole_number(1, 64),
        default=8,
        help="requests in flight at once, 1-64 (default 8)",
    )
    p.add_argument(
        "--seed", type=whole_number(0), default=0, help="seed of users and questions (default 0)"
    )
    p.add_argument("--gateway-url", help="default: FLYWHEEL_GATEWAY__URL or host:port")


def forget_args(p: argparse.ArgumentParser) -> None:
    """The user to erase."""
    p.add_argument(
        "user_id", type=non_empty, help="the raw user id; hashed here, never sent to Prefect"
    )


def consent_args(p: argparse.ArgumentParser) -> None:
    """Grant or withdraw, and the user."""
    p.add_argument(
        "action",
        choices=["grant", "withdraw"],
        help="grant: the user's traces may train models; withdraw: they no longer may",
    )
    p.add_argument(
        "user_id", type=non_empty, help="the raw user id; hashed here, only the key is stored"
    )


def keys_args(p: argparse.ArgumentParser) -> None:
    """create NAME [limits] | list | revoke KEY_ID."""
    sub = p.add_subparsers(dest="keys_action", required=True, help="what to do with keys")
    create = sub.add_parser("create", help="create a key and print it once")
    create.add_argument("name", type=non_empty, help="who the key is for (an app, a team)")
    create.add_argument(
        "--workload",
        action="append",
        type=workload,
        help="a workload the key may call (repeat for more; default: any)",
    )
    create.add_argument(
        "--rate",
        dest="rate_per_min",
        type=whole_number(1),
        help="requests a minute, per gateway process (default: no limit)",
    )
    create.add_argument(
        "--max-voices",
        type=whole_number(0),
        help="voices the key adds per version and release step "
        "(default: FLYWHEEL_GATEWAY__KEY_VOICES_PER_STEP; 0: no cap)",
    )
    sub.add_parser("list", help="every key, revoked ones too (never the key itself)")
    revoke = sub.add_parser("revoke", help="revoke a key: its callers get 401")
    revoke.add_argument("key", type=non_empty, help="the key's name or id (key_...)")
    for nested in sub.choices.values():  # the global flags after the action too
        nested.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object"
        )


def retention_args(p: argparse.ArgumentParser) -> None:
    """How many days raw data is kept."""
    p.add_argument("--days", type=whole_number(1), help="default: FLYWHEEL_RAW_RETENTION_DAYS")


def train_args(p: argparse.ArgumentParser) -> None:
    """Method and step budget of a training run."""
    p.add_argument(
        "--method",
        choices=["auto", "dpo", "rft", "grpo"],
        default=None,
        help="default: FLYWHEEL_TRAIN__METHOD (auto)",
    )
    p.add_argument(
        "--max-steps",
        type=whole_number(1),
        default=None,
        help="stop after this many optimizer steps (default: FLYWHEEL_TRAIN__MAX_STEPS)",
    )
    p.add_argument(
        "--workload",
        type=workload,
        default=None,
        metavar="W",
        help="train on this workload's rows alone (one FLYWHEEL_WORKLOADS lists), from its "
        "stable version (default: every workload's rows, from the shared stable version)",
    )


def workload_arg(p: argparse.ArgumentParser) -> None:
    """The workload whose release a command acts on (default: the shared release)."""
    p.add_argument(
        "--workload",
        type=workload,
        default=None,
        metavar="W",
        help="act on this workload's release alone (one FLYWHEEL_WORKLOADS lists; default: "
        "the shared release)",
    )


def margin_points(text: str) -> float | str:
    """A non-inferiority margin in points, 0-100 (``default``: the settings')."""
    if text == "default":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of points: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a margin is 0-100 points, not {text}")
    return value


def release_args(p: argparse.ArgumentParser) -> None:
    """The version to release and how."""
    p.add_argument(
        "version",
        type=model_version,
        help="the candidate model version, e.g. v3 (as train printed it)",
    )
    workload_arg(p)
    p.add_argument("--force", action="store_true", help="release a version rejected before")
    p.add_argument(
        "--skip-shadow",
        action="store_true",
        help="go from the golden gate straight to the canary steps (no shadow traffic)",
    )
    p.add_argument(
        "--non-inferior",
        type=margin_points,
        nargs="?",
        const="default",
        default=None,
        metavar="MARGIN",
        help="release a cheaper model (a distilled student): the gate tests that it is no "
        "worse than stable by more than MARGIN points (default: FLYWHEEL_DISTIL__MARGIN, 2) "
        "and measurably cheaper, instead of better",
    )


def distil_args(p: argparse.ArgumentParser) -> None:
    """The workload and student profile of a distillation run."""
    p.add_argument(
        "--workload",
        type=workload,
        default=None,
        metavar="W",
        help="distil this workload's stable version on its accepted traffic (default: the "
        "shared release's)",
    )
    p.add_argument(
        "--student",
        default=None,
        metavar="PROFILE",
        help="a student profile of FLYWHEEL_DISTIL__STUDENTS (default: the profile's own)",
    )
    p.add_argument(
        "--max-steps",
        type=whole_number(1),
        default=None,
        help="optimizer steps (default: FLYWHEEL_DISTIL__STEPS)",
    )


def version_arg(p: argparse.ArgumentParser) -> None:
    """One model version."""
    p.add_argument("version", type=model_version, help="a model version, e.g. v3")


def report_args(p: argparse.ArgumentParser) -> None:
    """A model version (its gate report), or ``agreement`` (every release's gate beside its
    canary) with the workload and where the plot goes."""
    p.add_argument(
        "version",
        type=report_subject,
        metavar="VERSION|agreement",
        help="a model version, e.g. v3 (its last gate report), or agreement (gate vs canary "
        "of every release)",
    )
    p.add_argument(
        "--workload",
        type=workload,
        default=None,
        metavar="W",
        help="agreement: this workload's releases only (default: every workload's)",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="agreement: where the PNG goes (default: $FLYWHEEL_HOME/reports/agreement.png)",
    )


def report_subject(value: str) -> str:
    """``agreement``, else a model version."""
    if value == "agreement":
        return value
    try:
        return model_version(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or agreement)") from None


def control_args(p: argparse.ArgumentParser) -> None:
    """Why and who, for the audit log; which workload's release."""
    workload_arg(p)
    p.add_argument("--reason", default="manual", help="why (audited; default: manual)")
    p.add_argument("--actor", default="cli", help="who acts (audited; default: cli)")


def promote_args(p: argparse.ArgumentParser) -> None:
    """Why, who, which workload's release, and whether to promote without a gate pass."""
    workload_arg(p)
    p.add_argument("--reason", default=None, help="why (required with --force; audited)")
    p.add_argument("--actor", default="cli", help="who acts (audited; default: cli)")
    p.add_argument(
        "--force",
        action="store_true",
        help="promote a candidate that has not passed the golden gate (needs --reason)",
    )


def lineage_args(p: argparse.ArgumentParser) -> None:
    """The user whose lineage to show."""
    p.add_argument("--user", type=non_empty, required=True, help="raw user id (hashed locally)")


def run_args(p: argparse.ArgumentParser) -> None:
    """Cycles, server, traffic and seed of the whole loop."""
    p.add_argument(
        "--cycles",
        type=whole_number(0, 20),
        default=1,
        help="improvement cycles, 0-20, each train -> release on new traffic (default 1; 0 "
        "with --distil: distil the stable versions on the traffic curated already)",
    )
    p.add_argument(
        "--server",
        choices=["local", "vllm"],
        default="local",
        help="local: the demo model in process; vllm: the Llama profile on a local vLLM "
        "(.venv-vllm, `make vllm`), candidates released as LoRA adapters",
    )
    p.add_argument(
        "--requests",
        type=whole_number(10),
        default=None,
        help=f"simulated requests per cycle, every workload's together (default {LOOP_REQUESTS})",
    )
    p.add_argument(
        "--seed",
        type=whole_number(0),
        default=0,
        help="seed of the base model and the simulated users (default 0)",
    )
    p.add_argument(
        "--scenario",
        choices=["drift"],
        default=None,
        help="drift: users start asking a new kind of question; the gate on the old golden set "
        "passes a candidate the canary catches, and after golden propose + review rejects it "
        "(seconds, scripted model versions, in $FLYWHEEL_HOME/scenarios/drift)",
    )
    p.add_argument(
        "--distil",
        action="store_true",
        help="after the cycles, distil each workload's new stable version into a smaller "
        "student and release it when no worse (FLYWHEEL_DISTIL__MARGIN) and cheaper",
    )
