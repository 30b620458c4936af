"""What the vLLM e2e test's two-workload release drill is made of: candidates published from a
trained adapter (a copy, or one made worse), users of one workload sending the demo agent's
requests through the gateway (``X-Flywheel-Workload``) with honest feedback, and the
Prometheus + Alertmanager pair of the repo's configs (shortened windows) on loopback."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from infra.store import LocalStore
from infra.traces.conversation import WORKLOAD_HEADER
from tests.e2e.test_alert_rollback import TOKEN, alertmanager_config, prometheus_config
from tests.procs import find_binary, free_port, service

CANDIDATE_ALERTS = (
    "CandidateModelRegression",
    "CandidateLatencyRegression",
    "CandidateNegativeFeedback",
)


def publish_adapter(store: LocalStore, source: str, version: str, *, scale_b: float = 1.0) -> None:
    """Publish ``version``: ``source``'s adapter, its LoRA B weights times ``scale_b`` (50: a
    candidate made worse, the same shape, so vLLM loads it; 1: a copy)."""
    from safetensors.torch import load_file, save_file

    from infra.serving.models import publish_model_dir

    work = store.root.parent / f"adapter-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prefix = f"models/{source}/"
    for key in store.list(prefix):
        rel = key[len(prefix) :]
        if rel != "_COMPLETE":
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(store.get(key))
    weights = load_file(str(work / "adapter_model.safetensors"))
    scaled = {k: (v * scale_b if "lora_B" in k else v) for k, v in weights.items()}
    save_file(scaled, str(work / "adapter_model.safetensors"))
    publish_model_dir(store, version, work)


@dataclass
class Users:
    """What one workload's users got: requests that failed, answers by model, feedback sent."""

    failed: int = 0
    models: Counter[str] = field(default_factory=Counter)
    feedback: Counter[int] = field(default_factory=Counter)


def _ask(
    gateway: str,
    workload: str,
    req: object,
    users: Users,
    lock: threading.Lock,
    *,
    vote: bool = True,
    votes_to: str | None = None,
) -> None:
    from tasks.demo import domain
    from tasks.demo.agent import request_messages
    from tasks.demo.simulate import ANSWER_TOKENS

    body = {
        "model": "flywheel",
        "messages": request_messages(req, None),  # type: ignore[arg-type]
        "max_tokens": ANSWER_TOKENS,
        "user": req.user.user_id,  # type: ignore[attr-defined]
    }
    # the admin token: the answer names the version that served it (no user's answer does)
    headers = {"Authorization": f"Bearer {TOKEN}", WORKLOAD_HEADER: workload}
    try:
        resp = httpx.post(f"{gateway}/v1/chat/completions", json=body, headers=headers, timeout=120)
        resp.raise_for_status()
        answer = resp.json()["choices"][0]["message"]["content"] or ""
        value = 1 if domain.verify(req.item, answer) == 1.0 else -1  # type: ignore[attr-defined]
        if vote:  # on the public listener, as a user votes (the admin one takes no votes)
            trace = {"trace_id": resp.headers["x-trace-id"], "value": value}
            voted = httpx.post(f"{votes_to or gateway}/v1/feedback", json=trace, timeout=30)
            voted.raise_for_status()
    except (httpx.HTTPError, KeyError, ValueError):
        with lock:
            users.failed += 1
        return
    with lock:
        users.models[resp.headers["x-flywheel-model"]] += 1
        users.feedback[value] += 1


CROWD = 2_000
"""The people the drill's voting crowd and paced users come from. New people keep coming, as
in production: a release step needs 10 distinct users on stable's 10 % holdback, and 500
requests of the demo's 200 people (heavy users among them) ran out before B's 90 % step had
them once A's crowd was gone (CI-20: 14 min); of 200 people the 120 requests after the first
240 bring 29 new voters, of 2,000 about 80 (CI-18: A's feedback rule never fired)."""


def burst(
    gateway: str,
    counts: dict[str, int],
    seed: int,
    seen: dict[str, Users],
    *,
    votes_to: str | None = None,
    population: int = 200,
) -> None:
    """``counts[w]`` requests of workload ``w``'s users (first turns of the demo agent's
    conversations) to ``gateway`` (the admin listener, whose answers name their version), four
    at a time, mixed, each user voting on ``votes_to`` (the public listener); tallied into
    ``seen[w]``. The users are drawn from ``population`` people (heavy users among them, as
    the demo's population has)."""
    from tasks.demo.simulate import build_population, plan_requests

    users = build_population(population, seed=0)
    lock = threading.Lock()
    jobs = []
    for i, (workload, n) in enumerate(sorted(counts.items())):
        plan = plan_requests(users, requests=n, seed=seed * 7 + i, feedback_fraction=1.0)
        jobs += [(workload, req) for req in plan]
    jobs.sort(key=lambda job: job[1].index)  # the workloads' users interleaved
    with ThreadPoolExecutor(4) as pool:
        for workload, req in jobs:
            pool.submit(
                _ask,
                gateway,
                workload,
                req,
                seen.setdefault(workload, Users()),
                lock,
                votes_to=votes_to,
            )


def paced(
    gateway: str, workload: str, every_s: float, stop: threading.Event, seen: dict[str, Users]
) -> None:
    """One request of ``workload``'s users every ``every_s`` seconds until ``stop`` is set, so
    fewer land in a rule's window (15 s, 120 s in the shortened rules) than the candidate
    alert rules need before judging (500 requests for a p99), and no votes (the feedback rule
    counts 20 voting users: an identical candidate's chance lead, judged every second of a
    shortened window, rolled B back once in four CI runs when these users voted): on two
    shared cores a handful of requests that shared a batch with slow ones would otherwise read
    as a regression of that workload's candidate; tallied into ``seen[workload]``."""
    from tasks.demo.simulate import build_population, plan_requests

    users = build_population(CROWD, seed=0)
    plan = plan_requests(users, requests=3000, seed=11, feedback_fraction=1.0)
    lock = threading.Lock()
    tally = seen.setdefault(workload, Users())
    for req in plan:
        if stop.wait(every_s):
            return
        _ask(gateway, workload, req, tally, lock, vote=False)


def firing(prometheus: str) -> set[tuple[str, str, str]]:
    """The candidate alerts Prometheus recorded as firing in the last 30 minutes, however
    briefly: (alertname, model, workload)."""
    query = (
        'count by (alertname, model, workload) (max_over_time(ALERTS{alertstate="firing"}[30m]))'
    )
    data = httpx.get(f"{prometheus}/api/v1/query", params={"query": query}, timeout=5).json()
    found = {
        (m.get("alertname", ""), m.get("model", ""), m.get("workload", ""))
        for m in (r["metric"] for r in data["data"]["result"])
    }
    return {f for f in found if f[0] in CANDIDATE_ALERTS}


# what the feedback alert of one workload reads, for a drill's failure message
FEEDBACK_INPUTS = (
    "release:candidate_feedback_users:increase30m",
    "release:candidate_thumbs_down_share:increase30m",
    "release:stable_feedback_users:increase30m",
    "release:stable_thumbs_down_share:increase30m",
)


def feedback_inputs(prometheus: str, workload: str) -> dict[str, list[float]]:
    """Each of :data:`FEEDBACK_INPUTS` for ``workload`` over the last 15 minutes, a value a
    minute (what the alert saw while the drill ran)."""
    out = {}
    end = time.time()
    for series in FEEDBACK_INPUTS:
        params = {
            "query": f'max({series}{{workload="{workload}"}})',
            "start": end - 900,
            "end": end,
            "step": 60,
        }
        data = httpx.get(f"{prometheus}/api/v1/query_range", params=params, timeout=5).json()
        values = [v for r in data["data"]["result"] for _t, v in r["values"]]
        out[series.split(":")[1]] = [round(float(v), 3) for v in values]
    return out


def alerting(
    stack: ExitStack, tmp_path: Path, *, admin_url: str, windows: dict[str, str] | None = None
) -> str:
    """Alertmanager (calling ``admin_url``'s /admin/alerts) and Prometheus (scraping its
    /admin/metrics) with the repo's configs, shortened windows (``windows``, else the alert
    test's); returns Prometheus's URL."""
    am_port, prom_port = free_port(), free_port()
    am_args = [
        find_binary("alertmanager"),
        f"--config.file={alertmanager_config(tmp_path, admin_url=admin_url)}",
        f"--storage.path={tmp_path / 'am'}",
        f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",
    ]
    stack.enter_context(
        service(am_args, f"http://127.0.0.1:{am_port}/-/ready", tmp_path / "am.log")
    )
    prom = f"http://127.0.0.1:{prom_port}"
    prom_cfg = prometheus_config(
        tmp_path,
        gateway=admin_url.removeprefix("http://"),
        alertmanager=f"127.0.0.1:{am_port}",
        self_addr=f"127.0.0.1:{prom_port}",
        windows=windows,
    )
    prom_args = [
        find_binary("prometheus"),
        f"--config.file={prom_cfg}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    stack.enter_context(service(prom_args, f"{prom}/-/ready", tmp_path / "prom.log"))
    return prom
