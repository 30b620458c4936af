"""A body's nesting and number of arrays and objects, measured on its bytes before parsing:
the same as the parsed value's, whatever its strings hold (brackets, escaped quotes and
backslashes), and a clear line for a body over a limit."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from infra.gateway.json_shape import shape_problem

TEXTS = ["a[b", "}{", '\\"[', "x\\\\", '\\\\\\"]]', "[[[[[[", '"', "\\", "é{", "plain"]


def depth(value: Any) -> int:
    if isinstance(value, dict | list):
        inner = value.values() if isinstance(value, dict) else value
        return 1 + max((depth(v) for v in inner), default=0)
    return 0


def containers(value: Any) -> int:
    if isinstance(value, dict | list):
        inner = value.values() if isinstance(value, dict) else value
        return 1 + sum(containers(v) for v in inner)
    return 0


def random_json(rng: random.Random, level: int = 0) -> Any:
    roll = rng.random()
    if level > 6 or roll < 0.3:
        return rng.choice([*TEXTS, 1, None, 2.5])
    if roll < 0.65:
        return [random_json(rng, level + 1) for _ in range(rng.randrange(4))]
    keys = [rng.choice(TEXTS) + str(i) for i in range(rng.randrange(4))]
    return {k: random_json(rng, level + 1) for k in keys}


def verdict(problem: str | None) -> str | None:
    if problem is None:
        return None
    return "deep" if "nested deeper" in problem else "many"


@pytest.mark.parametrize("seed", range(4))
def test_the_byte_scan_measures_what_the_parsed_value_holds(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        value = random_json(rng)
        for raw in (
            json.dumps(value).encode(),
            json.dumps(value, ensure_ascii=False, indent=1).encode(),
            orjson.dumps(value),
        ):
            for max_depth, max_containers in ((0, 0), (1, 3), (2, 5), (3, 10), (6, 100)):
                expected = None
                if depth(value) > max_depth:
                    expected = "deep"
                elif containers(value) > max_containers:
                    expected = "many"
                problem = shape_problem(raw, max_depth=max_depth, max_containers=max_containers)
                assert verdict(problem) == expected, (raw, max_depth, max_containers)


def test_brackets_in_text_are_not_nesting() -> None:
    code = "def f(x): return [[[[[[[[x]]]]]]]] + {'a': {'b': {'c': 1}}}" * 100
    body = json.dumps({"messages": [{"role": "user", "content": code}]}).encode()
    assert shape_problem(body, max_depth=3, max_containers=10) is None


def test_a_body_over_a_limit_gets_one_line_naming_it() -> None:
    deep = b"[" * 40 + b"]" * 40
    wide = b"[" + b",".join([b"[]"] * 100) + b"]"
    assert shape_problem(deep, max_depth=32, max_containers=1000) == (
        "the body is nested deeper than 32 levels"
    )
    assert shape_problem(wide, max_depth=32, max_containers=64) == (
        "the body holds more than 64 JSON arrays and objects"
    )
