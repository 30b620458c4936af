"""What a process imports before it does anything (STYLE: heavy imports inside the function
that needs them): a flow module without spaCy and torch (3 CPU-s, every flow-run and stage
process), the gateway without Prefect (2 CPU-s, every gateway worker)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def imported(module: str, *heavy: str) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has loaded after ``import module``."""
    probe = f"import sys, {module}; print(*[m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.split()


@pytest.mark.parametrize("flow", ["flows.curate", "flows.score", "flows.release"])
def test_a_flow_module_imports_no_spacy_or_torch(flow: str) -> None:
    assert imported(flow, "spacy", "thinc", "torch", "transformers") == []


def test_the_gateway_imports_no_prefect() -> None:
    assert imported("infra.gateway.service", "prefect", "torch") == []
