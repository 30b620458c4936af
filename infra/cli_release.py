"""``flywheel`` commands of stages 4 and 5, the release controls and the whole loop."""

from __future__ import annotations

import argparse
import json

from infra.cli import command


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=["auto", "dpo", "rft", "grpo"], default=None,
                   help="default: FLYWHEEL_TRAIN__METHOD (auto)")  # fmt: skip
    p.add_argument("--max-steps", type=int, default=None)


@command("train", "stage 4: preference pairs -> TRL -> a new model version", _train_args)
def _train(ns: argparse.Namespace) -> int:
    from flows.train import train

    r = train(method=ns.method, max_steps=ns.max_steps)
    print(f"train: {r.message}")
    if r.version:
        print(f"  {r.version} from {r.base_version} by {r.method} on {r.pairs} pairs; golden "
              f"accuracy {_pct(r.golden_accuracy_base)} -> {_pct(r.golden_accuracy)}")  # fmt: skip
    return 0


def _release_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("version")
    p.add_argument("--force", action="store_true", help="release a version rejected before")
    p.add_argument("--skip-shadow", action="store_true")


@command("release", "stage 5: gate -> shadow -> canary -> promote / roll back", _release_args)
def _release(ns: argparse.Namespace) -> int:
    from flows.release import ReleaseOptions, release

    r = release(ns.version, ReleaseOptions(force=ns.force, skip_shadow=ns.skip_shadow))
    print(f"release {r.version}: {r.outcome} ({r.phase}); " + "; ".join(r.reasons))
    if r.gate:
        g = r.gate
        print(f"  gate {g.get('decision')}: reward {g.get('mean_baseline'):.3f} -> "
              f"{g.get('mean_candidate'):.3f}, p = {g.get('p_value'):.2g}, n = {g.get('n')}")  # fmt: skip
    return 0 if r.outcome in ("promoted", "held", "stable") else 1


@command("status", "the routing state: stable, candidate, phase, weight, history")
def _status(ns: argparse.Namespace) -> int:
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from tasks.release.controls import release_status

    rt = Runtime.from_env()
    print(json.dumps(release_status(open_routing(rt.settings, rt.store)), indent=2, default=str))
    return 0


def _control_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason", default="manual")
    p.add_argument("--actor", default="cli")


def _control(action: str, ns: argparse.Namespace) -> int:
    from flows.release import release_control

    state = release_control(action, reason=ns.reason, actor=ns.actor)  # type: ignore[call-overload]
    print(f"{action}: stable {state.get('stable')}, candidate {state.get('candidate')}, "
          f"phase {state.get('phase')}, weight {state.get('weight')}")  # fmt: skip
    return 0


for _action, _help in {
    "promote": "make the candidate the stable version now",
    "pause": "hold the release where it is (traffic unchanged)",
    "resume": "continue a paused or held release",
    "abort": "end the release: candidate to 0 %, never released automatically again",
}.items():
    command(_action, _help, _control_args)(lambda ns, a=_action: _control(a, ns))


@command("rollback", "candidate weight and shadow to 0 at once (through the gateway if set)",
         _control_args)  # fmt: skip
def _rollback(ns: argparse.Namespace) -> int:
    from flows.rollback import rollback

    result = rollback(reason=ns.reason, actor=ns.actor)
    print(f"rollback: {result}")
    return 0


def _lineage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="raw user id (hashed locally)")


@command("lineage", "which model versions were trained on this user's data", _lineage_args)
def _lineage(ns: argparse.Namespace) -> int:
    from tasks.lineage import lineage_for_user

    found = lineage_for_user(ns.user)
    if not found.versions:
        print("lineage: no model version was trained on this user's data")
    for version in found.versions:
        print(f"{version}\t(by {found.evidence[version]})")
    return 0


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cycles", type=int, default=1)
    p.add_argument("--requests", type=int, default=None, help="simulated requests per cycle")
    p.add_argument("--seed", type=int, default=0)


@command("run", "the whole loop once (or --cycles N) on embedded defaults", _run_args)
def _run(ns: argparse.Namespace) -> int:
    from flows.loop import LoopOptions, run_loop

    opts = LoopOptions(cycles=ns.cycles, seed=ns.seed)
    if ns.requests:
        opts.requests = ns.requests
    summary = run_loop(opts)
    print(loop_report(summary))
    return 0


def loop_report(summary: object) -> str:
    """The short human summary ``flywheel run`` prints."""
    s = summary
    lines = [
        f"flywheel run: {len(s.cycles)} cycle(s) in {s.wall_s:.0f} s; base model "  # type: ignore[attr-defined]
        f"{s.base_version} ({'cached' if s.bootstrap_cached else 'bootstrapped'}, golden "  # type: ignore[attr-defined]
        f"accuracy {_pct(s.base_accuracy)})"  # type: ignore[attr-defined]
    ]
    for c in s.cycles:  # type: ignore[attr-defined]
        lines += [
            f"cycle {c.cycle} (baseline {c.baseline}):",
            f"  traces collected      {c.traces} ({c.quarantined} quarantined)",
            f"  PII entities removed  {c.pii_entities}; training examples {c.examples}",
            f"  preference pairs      {c.pairs}  [{c.train_status}]",
        ]
        if c.candidate:
            lines.append(f"  golden accuracy       {c.baseline} {_pct(c.baseline_accuracy)} -> "
                         f"{c.candidate} {_pct(c.candidate_accuracy)}")  # fmt: skip
        if c.p_value is not None:
            lines.append(f"  golden reward         {c.baseline_reward:.3f} -> "
                         f"{c.candidate_reward:.3f}, paired t-test p = {c.p_value:.2g} "
                         f"({c.decision})")  # fmt: skip
        lines.append(f"  release               {c.outcome}" +
                     (f" ({'; '.join(c.reasons)})" if c.reasons else ""))  # fmt: skip
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
