"""``flywheel release VERSION --workload W`` gates the candidate on W's golden set
(``FLYWHEEL_REWARD__GOLDEN_SETS``), scored by W's verifier (``FLYWHEEL_REWARD__VERIFIERS``),
against W's stable version; the shared release still gates on the shared golden set. Here v1
answers every capital right and every sum wrong: better for the capitals workload, worse for
the shared (calculator) one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.routing import RoutingState, load_state, save_state
from infra.settings import Settings, get_settings
from infra.store import open_store
from tests.fakes.upstream import start_fake_upstream
from tests.integration.test_release_flow import answerer, options

pytestmark = pytest.mark.integration

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
CAPITALS = PLUGINS / "mypkg" / "capitals.jsonl"


def atlas(*, capitals: bool, sums: bool) -> Any:
    """A model that answers capitals from the tool result (or Osaka) and sums right or not."""
    calculator = answerer(1.0 if sums else 0.0)

    def answer(messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1].get("content") or "")
        if "the capital is " in last:
            # in a sentence: the capitals verifier accepts it, an exact match would not
            return f"It is {last.rsplit('the capital is ', 1)[1]}." if capitals else "Osaka"
        return calculator(messages)

    return answer


@pytest.fixture
def env(flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Fake servers for v0 (sums right, capitals wrong) and v1 (the opposite), stable v0, and
    the capitals workload's golden set and verifier in settings."""
    handles = {
        "v0": start_fake_upstream("v0", answer=atlas(capitals=False, sums=True)),
        "v1": start_fake_upstream("v1", answer=atlas(capitals=True, sums=False)),
    }
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv(
        "FLYWHEEL_GATEWAY__UPSTREAMS", json.dumps({v: h.url for v, h in handles.items()})
    )
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["capitals"]')
    monkeypatch.setenv("FLYWHEEL_REWARD__GOLDEN_SETS", json.dumps({"capitals": str(CAPITALS)}))
    monkeypatch.setenv("FLYWHEEL_REWARD__VERIFIERS", '{"capitals": "mypkg.capitals:capital"}')
    for weight in ("FAITHFULNESS", "CONTEXT_RECALL", "FEEDBACK", "LATENCY"):  # the judge alone
        monkeypatch.setenv(f"FLYWHEEL_REWARD__W_{weight}", "0")
    get_settings.cache_clear()
    settings = get_settings()
    save_state(open_store(settings), RoutingState(stable="v0"))
    yield settings
    for handle in handles.values():
        handle.stop()


def test_a_workloads_candidate_is_gated_on_its_golden_set_and_verifier(
    prefect_api: None, env: Settings
) -> None:
    from flows.release import release

    store = open_store(env)
    mine = release("v1", options(workload="capitals"))

    gate = mine.gate or {}
    assert (gate["workload"], gate["baseline"], gate["n"]) == ("capitals", "v0", 4)
    # the capitals verifier judged them: every capital right against every one wrong
    assert (gate["mean_baseline"], gate["mean_candidate"]) == (0.0, 1.0)
    assert "regressed" not in " ".join(gate["reasons"])
    report = json.loads(store.get("gates/v1/report.json"))
    assert [i["item_id"] for i in report["items"]] == ["c1", "c2", "c3", "c4"]
    assert store.get("gates/v1/report.md").startswith(b"# Release gate: v1 vs v0 (workload")
    check = next(c for c in report["checks"] if c["name"] == "golden_verifier")
    assert "0.0% -> 100.0%" in check["detail"]
    state = load_state(store)
    assert (state.candidate, state.phase) == (None, "idle")  # the shared release: untouched
    assert state.for_workload("capitals").candidate == "v1"

    shared = release("v1", options(max_golden_items=20))

    assert (shared.outcome, shared.gate and shared.gate["decision"]) == ("rolled_back", "ROLLBACK")
    assert shared.gate is not None and shared.gate["n"] == 20 and "workload" not in shared.gate
    state = load_state(store)
    assert state.rejected == ["v1"]
    assert state.for_workload("capitals").candidate == "v1"  # W's release goes on
