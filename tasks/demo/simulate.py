"""Simulated users of the demo calculator agent, talking to the gateway like production apps.

A seeded Faker population (ids, names, emails, phones, cards, addresses, SSNs, IBANs, accounts
like ``123-45-678901``) asks the domain's questions through the gateway (the ``openai`` client),
leaking personal data as users do: in one or two habitual preambles, not every time. Some
opt out of training (``consent``); some give thumbs up/down that follows the verifier score.

Each request is the agent's final LLM call: the user message, the calculator tool call and
its result (the context the answer must be faithful to). A follow-up in the same conversation
(same session id) carries the earlier turns, answers included. All random choices are drawn up
front from the seed, so a run is reproducible whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from infra.privacy import user_key
from infra.traces.conversation import WORKLOAD_HEADER, Messages
from tasks.demo import domain, workloads
from tasks.demo.agent import conversations, request_messages
from tasks.demo.population import PREAMBLES, SimUser, build_population

__all__ = [
    "PREAMBLES",
    "Connection",
    "Crowd",
    "SimRequest",
    "SimUser",
    "build_population",
    "plan_requests",
    "simulate",
]

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import Settings

log = logging.getLogger(__name__)
ANSWER_TOKENS = 16  # the demo agent sets its budget, as real agents do (the gateway sets none)


@dataclass(frozen=True)
class SimRequest:
    """One planned request: who asks what, and what it follows up."""

    index: int
    user: SimUser
    session_id: str
    item: domain.DomainItem
    text: str  # the user message as sent (preamble + question)
    has_pii: bool
    gives_feedback: bool
    feedback_noise: float
    neutral: bool
    follows: int | None = None  # index of the earlier request this one follows up on
    workload: str | None = None  # sent as X-Flywheel-Workload (None: the default workload)


@dataclass(frozen=True, kw_only=True)
class Crowd:
    """Who the simulated users are and how they rate: ``n_users`` people drawn from
    ``population_seed`` (the same people come back run after run), an ``opt_out_fraction``
    of them opted out of training; a ``feedback_fraction`` of requests is rated, on the
    verifier score with ``feedback_noise``."""

    n_users: int = 200
    population_seed: int = 0
    opt_out_fraction: float = 0.1
    feedback_fraction: float = 0.3
    feedback_noise: float = 0.3


@dataclass(frozen=True, kw_only=True)
class Connection:
    """How the simulated users reach the gateway: the key they send, each call's timeout."""

    api_key: str = "sk-flywheel-simulator"
    timeout_s: float = 60.0


@dataclass
class SimulationSummary:
    """What a simulation sent and got back (counts only)."""

    requests: int = 0
    succeeded: int = 0
    failed: int = 0
    users: int = 0
    active_users: int = 0
    opted_out_users: int = 0
    opted_out_requests: int = 0
    requests_with_pii: int = 0
    correct: int = 0
    feedback: Counter[int] = field(default_factory=Counter)  # value -> count sent
    feedback_failed: int = 0
    missing_trace_id: int = 0
    consent_rows_written: int = 0
    models: Counter[str] = field(default_factory=Counter)
    wall_s: float = 0.0

    @property
    def accuracy(self) -> float:
        """The share of answers the verifier accepted."""
        return self.correct / self.succeeded if self.succeeded else 0.0

    def describe(self) -> str:
        """A short human summary (what ``flywheel simulate`` prints)."""
        fb = self.feedback
        return (
            f"{self.requests} requests ({self.succeeded} ok, {self.failed} failed) from "
            f"{self.active_users} of {self.users} users in {self.wall_s:.0f} s; "
            f"{self.requests_with_pii} with personal data; {self.opted_out_requests} from "
            f"{self.opted_out_users} opted-out users; answers correct {self.accuracy:.1%}; "
            f"feedback {fb[1]} up / {fb[-1]} down / {fb[0]} neutral "
            f"({self.feedback_failed} failed, {self.missing_trace_id} without trace id); "
            f"{self.consent_rows_written} consent rows written"
        )


def plan_requests(
    users: list[SimUser],
    *,
    requests: int,
    seed: int,
    feedback_fraction: float = 0.3,
    feedback_noise: float = 0.3,
    session_length: int = 3,
    followup_fraction: float = 0.25,
    demo_workloads: tuple[str, ...] = (workloads.CALCULATOR,),
) -> list[SimRequest]:
    """Who asks what, in which session, with which preamble, and whether they rate it; a
    ``followup_fraction`` of requests continue the user's previous conversation when it is in
    the same session. Questions come from ``demo_workloads`` in equal shares (a follow-up
    stays with its conversation's agent); with several, each request names its workload."""
    rng = random.Random(seed + 1)
    follow_rng = random.Random(seed + 2)  # its own stream: the rest of the plan is unchanged
    weights = [1.0 / (rank + 1) ** 0.7 for rank in range(len(users))]  # a few heavy users
    asked: Counter[str] = Counter()
    last: dict[str, SimRequest] = {}
    plan = []
    for index in range(requests):
        user = rng.choices(users, weights=weights, k=1)[0]
        item = workloads.sample_question(rng, demo_workloads)
        has_pii = rng.random() < user.leak_rate
        text = item.question
        if has_pii:
            preamble = PREAMBLES[rng.choice(user.preambles)].format(**user.pii())
            text = f"{preamble} {item.question}"
        session = f"{user.user_id}-s{asked[user.user_id] // session_length}"
        asked[user.user_id] += 1
        previous = last.get(user.user_id)
        follows = (
            previous.index
            if previous is not None
            and previous.session_id == session
            and follow_rng.random() < followup_fraction
            and previous.item.workload == item.workload  # a conversation is one agent's
            else None
        )
        plan.append(
            SimRequest(
                index=index,
                user=user,
                session_id=session,
                item=item,
                text=text,
                has_pii=has_pii,
                gives_feedback=rng.random() < feedback_fraction,
                feedback_noise=rng.gauss(0.0, feedback_noise),
                neutral=rng.random() < 0.05,
                follows=follows,
                workload=workloads.workload_of(item) if workloads.tagged(demo_workloads) else None,
            )
        )
        last[user.user_id] = plan[-1]
    return plan


def feedback_value(score: float, req: SimRequest) -> Literal[-1, 0, 1]:
    """Thumbs up when the (noisy) verifier score is above 0.5, down otherwise; rarely neutral."""
    if req.neutral:
        return 0
    return 1 if score + req.feedback_noise > 0.5 else -1


def record_consent(
    catalog: Catalog, users: list[SimUser], *, salt: str, at: datetime | None = None
) -> int:
    """Write each user's consent state to the ``consent`` table when it is new or changed;
    returns the rows written (a rerun with the same population writes none)."""
    from infra.catalog import append_rows, scan

    current: dict[str, tuple[datetime, bool]] = {}
    for row in scan(catalog, "consent").to_pylist():
        prev = current.get(row["user_key"])
        if prev is None or row["updated_at"] >= prev[0]:
            current[row["user_key"]] = (row["updated_at"], bool(row["consent_to_training"]))
    at = at or datetime.now(UTC)
    rows = []
    for user in users:
        key, consent = user_key(user.user_id, salt), not user.opted_out
        if key not in current or current[key][1] != consent:
            rows.append({"user_key": key, "consent_to_training": consent, "updated_at": at})
    append_rows(catalog, "consent", rows)
    return len(rows)


async def _send(
    client: Any,
    http: Any,
    req: SimRequest,
    summary: SimulationSummary,
    gateway_root: str,
    history: Messages | None = None,
) -> str | None:
    """Send one request (after ``history``) and its feedback; returns the answer (None when
    the request failed)."""
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="flywheel",
            messages=request_messages(req, history),
            max_tokens=ANSWER_TOKENS,
            user=req.user.user_id,
            extra_headers=_headers(req),
        )
        completion = raw.parse()
    except Exception as exc:  # a failed request is a finding of the run, not a crash
        summary.failed += 1
        log.warning("request %d failed: %s", req.index, type(exc).__name__)
        return None
    summary.succeeded += 1
    summary.models[completion.model] += 1
    answer = (completion.choices[0].message.content or "") if completion.choices else ""
    score = workloads.verify(req.item, answer)
    summary.correct += int(score == 1.0)
    if req.gives_feedback:
        await _feedback(http, raw.headers.get("x-trace-id"), req, score, summary, gateway_root)
    return answer


def _headers(req: SimRequest) -> dict[str, str]:
    """The request's session id, and its workload when the demo runs several."""
    headers = {"X-Session-Id": req.session_id}
    if req.workload:
        headers[WORKLOAD_HEADER] = req.workload
    return headers


async def _feedback(
    http: Any,
    trace_id: str | None,
    req: SimRequest,
    score: float,
    summary: SimulationSummary,
    gateway_root: str,
) -> None:
    if not trace_id:
        summary.missing_trace_id += 1
        return
    value = feedback_value(score, req)
    try:
        resp = await http.post(
            f"{gateway_root}/v1/feedback", json={"trace_id": trace_id, "value": value}
        )
        resp.raise_for_status()
        summary.feedback[value] += 1
    except Exception as exc:
        summary.feedback_failed += 1
        log.warning("feedback for request %d failed: %s", req.index, type(exc).__name__)


async def _run(
    plan: list[SimRequest],
    *,
    gateway_root: str,
    concurrency: int,
    api_key: str,
    timeout_s: float,
    summary: SimulationSummary,
) -> None:
    import httpx
    from openai import AsyncOpenAI

    queue: asyncio.Queue[list[SimRequest]] = asyncio.Queue()
    for chain in conversations(plan):
        queue.put_nowait(chain)
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        AsyncOpenAI(
            base_url=f"{gateway_root}/v1", api_key=api_key, max_retries=1, timeout=timeout_s
        ) as client,
        httpx.AsyncClient(timeout=timeout_s, headers=headers) as http,
    ):

        async def worker() -> None:
            while not queue.empty():
                history: Messages = []
                chain = queue.get_nowait()
                for req in chain:
                    answer = await _send(client, http, req, summary, gateway_root, history)
                    if answer is None:  # the user gives up on a conversation that failed
                        summary.failed += len(chain) - chain.index(req) - 1
                        break
                    history = [
                        *request_messages(req, history),
                        {"role": "assistant", "content": answer},
                    ]

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))


def simulate(
    base_url: str,
    *,
    requests: int,
    concurrency: int = 8,
    seed: int = 0,
    crowd: Crowd = Crowd(),
    catalog: Catalog | None = None,
    settings: Settings,
    connection: Connection = Connection(),
) -> SimulationSummary:
    """Send ``requests`` simulated user requests through the gateway at ``base_url`` (its root,
    e.g. ``http://127.0.0.1:8088``), record consent, give feedback; returns what happened.

    ``crowd.population_seed`` fixes who the users are (the same people come back run after
    run); ``seed`` fixes what they ask this run (vary it per cycle for fresh traffic)."""
    from infra.catalog import open_catalog

    started = time.perf_counter()
    gateway_root = base_url.rstrip("/").removesuffix("/v1")
    users = build_population(
        crowd.n_users, seed=crowd.population_seed, opt_out_fraction=crowd.opt_out_fraction
    )
    plan = plan_requests(
        users,
        requests=requests,
        seed=seed,
        feedback_fraction=crowd.feedback_fraction,
        feedback_noise=crowd.feedback_noise,
        demo_workloads=workloads.of_settings(settings),
    )
    summary = SimulationSummary(requests=requests, users=len(users))
    summary.opted_out_users = sum(u.opted_out for u in users)
    summary.consent_rows_written = record_consent(
        catalog or open_catalog(settings), users, salt=settings.salt()
    )
    summary.active_users = len({r.user.user_id for r in plan})
    summary.opted_out_requests = sum(r.user.opted_out for r in plan)
    summary.requests_with_pii = sum(r.has_pii for r in plan)
    asyncio.run(
        _run(
            plan,
            gateway_root=gateway_root,
            concurrency=concurrency,
            api_key=connection.api_key,
            timeout_s=connection.timeout_s,
            summary=summary,
        )
    )
    summary.wall_s = time.perf_counter() - started
    log.info(
        "simulated %d requests (%d ok, %d failed), %d feedback events in %.1f s",
        requests,
        summary.succeeded,
        summary.failed,
        sum(summary.feedback.values()),
        summary.wall_s,
    )
    return summary
