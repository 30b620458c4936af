"""A replacement for the versions an erasure reaches, and their retirement.

The replacement is the serving version's recipe (method, hyperparameters) trained again on
its reproducible training set minus the erased rows (:func:`reproduce_training_rows`). When
the serving version was itself trained from a version that saw an erased user, the chain is
walked back to the newest base that never did, and the training sets of every version on the
way are used (minus the erased rows): the replacement inherits nothing from the erased data.

Once the replacement is promoted (or a person resolves a failed one), the reached versions
are *retired*: listed in the routing state's ``retired`` (never routed, released, promoted or
rolled back to again; the gateway refuses them by name), unloaded from the model server, and
marked on their model cards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from infra.errors import ObjectNotFound, StoreError
from infra.keys import model_prefix
from infra.retries import retry_call
from tasks.governance.reach import ErasureCase, now
from tasks.train.erasures import erased_digests, reproduce_training_rows, trace_digest
from tasks.train.lineage import CARD, Lineage, read_lineage

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.routing import RoutingBackend, RoutingState
    from infra.store import ObjectStore
    from tasks.datasets import BufferedExample


@dataclass(kw_only=True)
class ReplacementPlan:
    """What the replacement trains: ``recipe`` (the serving version's lineage) from ``base``
    on ``rows`` (the chain's training sets minus the erased rows)."""

    serving: str
    base: str
    recipe: Lineage
    chain: list[str]  # the versions whose training sets are used, newest first
    rows: list[BufferedExample] = field(default_factory=list)  # training_examples rows
    erased: int = 0  # trained rows left out because they were erased


def reached(cases: list[ErasureCase]) -> set[str]:
    """The versions the open cases reach that are not retired yet."""
    return {v for c in cases for v in c.serving()}


def plan_replacement(
    store: ObjectStore, catalog: Catalog, *, serving: str, cases: list[ErasureCase]
) -> ReplacementPlan:
    """The replacement of ``serving`` (see the module docstring).

    Raises:
        ValueError: a trained row is missing and no erasure accounts for it.
        ObjectNotFound: a version on the chain has no lineage.
    """
    affected = reached(cases)
    recipe = read_lineage(store, serving)
    chain, lineages, base = [serving], [recipe], recipe.base_version
    while base in affected:
        chain.append(base)
        lineages.append(read_lineage(store, base))
        base = lineages[-1].base_version
    erased = erased_digests(store)
    plan = ReplacementPlan(serving=serving, base=base, recipe=recipe, chain=chain)
    seen: set[str] = set()
    for lineage in lineages:
        got = reproduce_training_rows(catalog, store, lineage)
        plan.erased += len(got.erased)
        for row in got.rows.to_pylist():
            tid = row["trace_id"]
            if tid in seen or trace_digest(tid) in erased:  # time travel may still hold them
                plan.erased += tid not in seen
                continue
            seen.add(tid)
            plan.rows.append(row)
    return plan


IN_PROGRESS = ("gating", "shadow", "canary", "held")


def lines_reached(state: RoutingState, affected: set[str]) -> dict[str | None, RoutingState]:
    """The release lines an erasure reaches: line (None: the shared one, else a workload with
    a line of its own) -> its view, for each line whose stable version or release candidate
    saw an erased user. A workload without its own stable version follows the shared one
    and is replaced with it (its entry is listed only when its own candidate is reached)."""
    lines: dict[str | None, RoutingState] = {}
    for workload in [None, *sorted(state.workloads)]:
        view = state.release_of(workload)
        own_stable = workload is None or state.workloads[workload].stable is not None
        stable_hit = own_stable and view.stable in affected
        candidate_hit = view.candidate in affected and view.phase in IN_PROGRESS
        if stable_hit or candidate_hit:
            lines[workload] = view
    return lines


def routed_versions(state: RoutingState) -> set[str]:
    """Every version some release line serves: each line's stable version and its candidate
    while its release is in progress (a retired version must be none of them)."""
    routed: set[str] = set()
    for workload in [None, *state.workloads]:
        view = state.release_of(workload)
        routed.add(view.stable)
        if view.candidate and view.phase in IN_PROGRESS:
            routed.add(view.candidate)
    return routed


def rollback_target(state: RoutingState, *, avoid: set[str], servable: Any) -> str | None:
    """The newest version that was stable before and never saw an erased user (not in
    ``avoid``), not retired or rejected, and servable (``servable(version) -> bool``)."""
    from tasks.release.machine.restore import earlier_stables

    for version in [state.stable, *earlier_stables(state)]:
        bad = version in avoid or version in state.retired or version in state.rejected
        if not bad and servable(version):
            return version
    return None


def line_rollback_target(
    state: RoutingState, workload: str, *, avoid: set[str], servable: Any
) -> str | None:
    """Where ``workload``'s own line rolls back to: its stable version or the newest version
    its line served before (each promotion's version and the stable it replaced), else the
    shared stable version; the first that never saw an erased user (not in ``avoid``), is
    not retired nor rejected on that line, and is servable. None when there is none."""
    view = state.release_of(workload)
    own: list[str] = [view.stable]
    for t in reversed(view.history):
        if t.to_phase == "promoted":
            own += [v for v in (t.candidate, t.evidence.get("previous_stable")) if v]
    for version in dict.fromkeys([*own, state.stable]):
        bad = version in avoid or version in state.retired or version in view.rejected
        if not bad and servable(version):
            return version
    return None


def retire_versions(
    routing: RoutingBackend,
    catalog: Catalog | None,
    versions: set[str],
    *,
    receipts: list[str],
    actor: str,
    reason: str,
    subject: str,
    evidence: dict[str, Any] | None = None,
    **changes: Any,
) -> RoutingState:
    """Add ``versions`` to the routing state's ``retired`` list (with ``changes``, e.g. a new
    stable version, in the same compare-and-swap) and audit it under every receipt.

    Raises:
        RejectedVersion: the change would route traffic to a retired version.
    """
    from infra.routing import StateChange

    def write() -> RoutingState:
        state = routing.load()
        change = StateChange(
            retired=sorted(set(state.retired) | versions),
            subject=subject,
            actor=actor,
            reason=reason,
            evidence={**(evidence or {}), "retired": sorted(versions), "receipts": receipts},
            expected_revision=state.revision,
            **changes,
        )
        return routing.transition(change)

    saved = retry_call(write, operation="erasure retire")
    if catalog is not None:
        from infra.audit import record_event

        for receipt in receipts:
            record_event(
                catalog,
                event_type="erasure.retired",
                actor=actor,
                subject=receipt,
                details={"retired": sorted(versions), "stable": saved.stable, "reason": reason},
            )
    return saved


def mark_card(store: ObjectStore, version: str, section: str, body: dict[str, Any]) -> None:
    """Set ``section`` of ``version``'s model card (a version without a card is left alone)."""
    key = model_prefix(version) + CARD
    try:
        card = yaml.safe_load(store.get(key)) or {}
    except ObjectNotFound:
        return
    card[section] = body
    store.put(key, yaml.safe_dump(card, sort_keys=False).encode())


def mark_retired(
    store: ObjectStore, versions: set[str], *, receipts: list[str], replaced_by: str, how: str
) -> None:
    """Each retired version's card says so: when, why (receipts, never the user), by what."""
    at = now().isoformat()
    for version in sorted(versions):
        body = {"at": at, "receipts": receipts, "replaced_by": replaced_by, "how": how}
        try:
            mark_card(store, version, "retired", body)
        except StoreError:  # the routing state already retired it; the card is a record
            continue


def mark_replacement(
    store: ObjectStore, plan: ReplacementPlan, version: str, receipts: list[str]
) -> None:
    """The replacement's card names the receipts it honours and what it replaces."""
    body = {
        "honours_receipts": receipts,
        "replaces": plan.serving,
        "recipe_of": plan.serving,
        "trained_from": plan.base,
        "training_sets_of": plan.chain,
        "erased_rows_left_out": plan.erased,
    }
    mark_card(store, version, "erasure", body)
