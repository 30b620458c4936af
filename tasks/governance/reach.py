"""Erasure reaching the models: which model versions an erasure touches, and its case file.

``forget-user`` opens one case per receipt (``governance/models/<receipt>.json``): every
model version whose training set held the user's rows (from lineage), or that was trained
from such a version (it inherited what its base learned), with its role when the request
came (stable, candidate, baking, archived or retired), the counts each store reported, and
the deadline. A case stays *pending* while a version that saw the user serves; the weekly
run trains a replacement (:mod:`.replacement`), and the steps it takes are appended to the
case, so ``flywheel erasure-status RECEIPT`` can show what was done and when. A case names
no user and no trace: a receipt, versions, counts and times only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from prefect import task
from pydantic import BaseModel

from infra.errors import ObjectNotFound
from infra.keys import ERASURE_CASES_PREFIX
from infra.serving import models
from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing import RoutingState
    from infra.runtime import Runtime
    from infra.store import ObjectStore

Role = Literal["stable", "candidate", "baking", "archived", "retired"]
CaseStatus = Literal["pending", "replacement_failed", "done"]


class Step(BaseModel):
    """One thing done for the erasure: when, what, and on which store or version."""

    at: datetime
    step: str
    subject: str  # a store ("tables", "langfuse", ...) or a model version
    detail: str


class VersionEntry(BaseModel):
    """A model version the erasure reaches."""

    role: Role  # when the request came
    evidence: str  # "time-travel" | "lineage.json" | "trained from vN"
    status: str = "affected"  # affected -> retired (or kept, while a person decides)
    at: datetime | None = None  # when the status last changed


class ErasureCase(BaseModel):
    """The model side of one erasure (see the module docstring)."""

    receipt: str
    requested_at: datetime
    deadline_at: datetime
    status: CaseStatus
    versions: dict[str, VersionEntry] = {}
    stores: dict[str, dict[str, Any]] = {}
    replacement: str | None = None  # the version trained without the erased rows
    # release lines (a workload, or "default": the shared one) whose replacement failed and
    # wait for a person -> that line's failed replacement ("" when none could be trained)
    failed_on: dict[str, str] = {}
    steps: list[Step] = []

    def add(self, step: str, subject: str, detail: str, at: datetime | None = None) -> None:
        """Append a step (now, unless ``at``)."""
        self.steps.append(Step(at=at or now(), step=step, subject=subject, detail=detail))

    def serving(self) -> list[str]:
        """The affected versions not yet retired."""
        return [v for v, e in self.versions.items() if e.status != "retired"]

    def serving_roles(self) -> list[str]:
        """The reached versions that were the stable one or the candidate when requested
        (those need a replacement; the others are retired at once)."""
        return [v for v, e in self.versions.items() if e.role in ("stable", "candidate")]


def now() -> datetime:
    """The current time in UTC (the clock case steps are stamped with)."""
    return datetime.now(UTC)


def case_key(receipt: str) -> str:
    """The store key of the erasure case of ``receipt``."""
    return f"{ERASURE_CASES_PREFIX}{receipt}.json"


def save_case(store: ObjectStore, case: ErasureCase) -> None:
    """Write the case (one object per receipt; a rerun replaces it)."""
    store.put(case_key(case.receipt), case.model_dump_json(indent=2).encode())


def create_case(store: ObjectStore, case: ErasureCase) -> None:
    """Write a new case, only if none exists under its receipt (an earlier request's case is
    never replaced).

    Raises:
        PreconditionFailed: a case already exists under the receipt.
    """
    store.put_if(case_key(case.receipt), case.model_dump_json(indent=2).encode(), etag=None)


def load_case(store: ObjectStore, receipt: str) -> ErasureCase:
    """The case of ``receipt``.

    Raises:
        ObjectNotFound: no forget-user ran under this receipt (with an erasure to record).
    """
    try:
        return ErasureCase.model_validate_json(store.get(case_key(receipt)))
    except ObjectNotFound:
        raise ObjectNotFound(
            f"no erasure under receipt {receipt[:16]}...: check the receipt forget-user printed"
        ) from None


def list_cases(store: ObjectStore) -> list[ErasureCase]:
    """Every case, oldest request first."""
    cases = [
        ErasureCase.model_validate_json(store.get(k)) for k in store.list(ERASURE_CASES_PREFIX)
    ]
    return sorted(cases, key=lambda c: c.requested_at)


def erasure_pending(store: ObjectStore) -> bool:
    """Whether an erasure waits for a replacement of the models that saw the user."""
    return any(c.status == "pending" for c in list_cases(store))


def open_cases(store: ObjectStore) -> list[ErasureCase]:
    """The cases not done (pending, or whose replacement failed), oldest first."""
    return [c for c in list_cases(store) if c.status != "done"]


# --- which versions, in which role --------------------------------------------------------


def role_of(state: RoutingState, version: str, *, bake_s: float, at: datetime) -> Role:
    """The version's place in the serving path now, on any release line (the shared one or
    a workload's own)."""
    from tasks.release.machine.adapters import retired_at

    if version in state.retired:
        return "retired"
    lines = [state.release_of(w) for w in [None, *state.workloads]]  # a workload's own too
    if any(version == line.stable for line in lines):
        return "stable"
    in_progress = ("gating", "shadow", "canary", "held")
    if any(version == line.candidate and line.phase in in_progress for line in lines):
        return "candidate"
    since = retired_at(state, version)
    if since is not None and (at - since).total_seconds() < bake_s:
        return "baking"
    return "archived"


def reached_versions(
    store: ObjectStore, catalog: Catalog, *, key: str
) -> dict[str, tuple[str, str | None]]:
    """Versions that trained on the user's rows (lineage), plus every version trained from one
    of them: version -> (evidence, base version)."""
    from tasks.train.lineage import LINEAGE
    from tasks.train.user_lineage import versions_trained_on

    direct = versions_trained_on(store, catalog, key=key)
    found: dict[str, tuple[str, str | None]] = {}
    for version in models.list_versions(store):  # oldest first: bases before their children
        try:
            base = models.read_model_json(store, version, LINEAGE).get("base_version")
        except ObjectNotFound:
            base = None
        if version in direct.evidence:
            found[version] = (direct.evidence[version], base)
        elif base in found:
            found[version] = (f"trained from {base}", base)
    return found


@task(**IO_RETRIES)
def reached_versions_task(
    store: ObjectStore, catalog: Catalog, key: str
) -> dict[str, tuple[str, str | None]]:
    """Returns the versions the user's data reached: version -> (evidence, base version)."""
    return reached_versions(store, catalog, key=key)


def new_case(
    *,
    receipt: str,
    reached: dict[str, tuple[str, str | None]],
    state: RoutingState,
    bake_s: float,
    deadline_days: int,
    stores: dict[str, dict[str, Any]],
) -> ErasureCase:
    """The case of a forget-user that just erased the data: pending when a version that saw
    the user is the stable one or the candidate, else done (nothing serving needs replacing)."""
    at = now()
    versions = {
        v: VersionEntry(role=role_of(state, v, bake_s=bake_s, at=at), evidence=ev)
        for v, (ev, _) in reached.items()
    }
    for entry in versions.values():
        if entry.role == "retired":  # by an earlier erasure: nothing left to do for it
            entry.status, entry.at = "retired", at
    serving = any(e.role in ("stable", "candidate") for e in versions.values())
    case = ErasureCase(
        receipt=receipt,
        requested_at=at,
        deadline_at=at + timedelta(days=deadline_days),
        status="pending" if serving else "done",
        versions=versions,
        stores=stores,
    )
    for name, counts in stores.items():
        case.add("erased", name, _counts_text(counts), at=at)
    for v, e in versions.items():
        case.add("reached", v, f"{e.role} when requested ({e.evidence})", at=at)
    if not versions:
        case.add("reached", "models", "no model version trained on this user's data", at=at)
    elif not serving:
        case.add("no replacement needed", "models", "no version that saw the user serves", at=at)
    return case


def _counts_text(counts: dict[str, Any]) -> str:
    parts = []
    for k, v in counts.items():
        if isinstance(v, dict):
            v = sum(int(x) for x in v.values())
        parts.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(parts) or "nothing"


def record_langfuse_confirmed(store: ObjectStore, receipt: str, confirmed: int) -> ErasureCase:
    """Hook for the Langfuse eraser's read-back (deletes are queued by Langfuse, so they are
    *requested* until a read-back finds the traces gone): record how many of the receipt's
    requested deletes are confirmed; ``erasure-status`` shows ``requested N / confirmed M``.

    Raises:
        ObjectNotFound: no case under ``receipt``.
    """
    case = load_case(store, receipt)
    counts = case.stores.setdefault("langfuse", {"requested": 0, "confirmed": 0})
    if int(counts.get("confirmed", 0)) != confirmed:
        counts["confirmed"] = confirmed
        case.add(
            "confirmed",
            "langfuse",
            f"{confirmed} of {counts.get('requested', 0)} deletes read back",
        )
        save_case(store, case)
    return case


# --- the deadline gauge -------------------------------------------------------------------


def erasure_gauges(
    cases: list[ErasureCase], *, deadline_days: int, at: datetime
) -> dict[str, float]:
    """The gauges the deadline alert reads: the oldest open erasure's age in seconds (0 when
    none), the deadline in seconds, and how many replacements failed and wait for a person."""
    open_ = [c for c in cases if c.status != "done"]
    oldest = min((c.requested_at for c in open_), default=None)
    return {
        "flywheel_erasure_oldest_pending_seconds": (
            0.0 if oldest is None else max(0.0, (at - oldest).total_seconds())
        ),
        "flywheel_erasure_deadline_seconds": float(deadline_days * 86400),
        "flywheel_erasure_replacement_failed": float(
            sum(c.status == "replacement_failed" for c in cases)
        ),
    }


def case_json(case: ErasureCase) -> dict[str, Any]:
    """The case as plain JSON values (``erasure-status --json``)."""
    return dict(json.loads(case.model_dump_json()))


def publish_gauges(rt: Runtime) -> dict[str, float]:
    """Publish the erasure gauges (stage ``erasure``, with the stage metrics); returns them."""
    gauges = erasure_gauges(
        list_cases(rt.store), deadline_days=rt.settings.erasure.deadline_days, at=now()
    )
    with rt.reporting("erasure") as report:
        for name, value in gauges.items():
            report.gauge(name, value)
    return gauges
