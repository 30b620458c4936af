"""argparse types shared by the CLI's command modules."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (inclusive)."""

    def parse(value: str) -> int:
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"expected a whole number {span}, got {value!r}")
        return number

    parse.__name__ = "whole number"
    return parse


def workload(value: str) -> str:
    """An argparse type: a workload ``FLYWHEEL_WORKLOADS`` lists, or ``default`` (the shared
    release); any other name is refused before anything runs."""
    from infra.errors import UnknownWorkload
    from infra.settings import get_settings
    from infra.settings.workloads import configured_workload

    try:
        return configured_workload(value, get_settings().workloads) or value
    except UnknownWorkload as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def model_version(value: str) -> str:
    """An argparse type: a model version (``v<number>``, or a version an upstream names);
    refused with the message the run forms give (:func:`infra.parameters.check_model_version`)."""
    from infra.parameters import check_model_version

    try:
        return check_model_version(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
