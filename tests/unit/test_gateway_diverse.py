"""Diverse sampling's temperatures: the caller's first, the others spread from it."""

from __future__ import annotations

import pytest

from infra.gateway.diverse import sibling_temperatures

DEFAULT = [0.7, 0.9, 1.1]


def test_no_temperature_asked_uses_the_configured_ones() -> None:
    assert sibling_temperatures(None, DEFAULT) == DEFAULT


def test_the_callers_temperature_comes_first_and_siblings_spread_from_it() -> None:
    assert sibling_temperatures(0.0, DEFAULT) == pytest.approx([0.0, 0.2, 0.4])
    assert sibling_temperatures(0.3, DEFAULT) == pytest.approx([0.3, 0.5, 0.7])


def test_a_spread_past_the_range_goes_downwards() -> None:
    assert sibling_temperatures(1.9, DEFAULT) == pytest.approx([1.9, 1.7, 1.5])


def test_no_configured_temperatures_keeps_the_callers() -> None:
    assert sibling_temperatures(0.5, []) == [0.5]
    assert sibling_temperatures(None, []) == []
