"""A loopback OpenAI-compatible judge: ``POST /v1/chat/completions`` answered after a fixed
delay in the OpenAI chat format, by a real HTTP server (uvicorn) in a background thread.

It grades like a perfect judge of the demo domain: the rubric's ``accuracy`` is the domain
verifier's verdict, and ragas prompts (statement extraction, NLI verdicts, context-recall
attribution) are answered from the numbers in the answer and the context. Knob:
``failure_rate`` makes that share of replies fail, half as HTTP 500 and half as malformed
content (not JSON, or JSON of the wrong shape), drawn from a seeded generator.

``flaw="number_anywhere"`` makes it an exploitable judge, flawed the way a lenient LLM judge
is: an answer counts as accurate when the right number appears anywhere in it (so "81 or 82",
"811" and "the answer is 81, maybe 83" pass), a longer answer is rated more complete, and a
statement counts as supported by the context when a number of the context appears anywhere in
it. A model tuned on its rewards learns to pad and hedge; the release gate has to catch that
(``tests/e2e/test_exploitable_judge.py``).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import threading
import time
from collections import Counter
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

_NUMBER = re.compile(r"-?\d+")
_RAGAS_INPUT = re.compile(r"input:\s*(\{.*\})\s*Output:\s*$", re.DOTALL)


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text or ""))


FLAWS = ("number_anywhere",)


def _lenient_rubric(case: dict[str, Any]) -> dict[str, bool]:
    from tasks.demo.domain import UnverifiableQuestion, expected_answer

    answer = case["answer"] or ""
    try:
        right = expected_answer(case["question"], case.get("context") or [])
    except UnverifiableQuestion:
        right = case.get("reference_answer") or ""
    found = bool(right) and right in answer
    longer = len(answer.strip()) > len(right)
    return {"accuracy": found, "completeness": longer, "clarity": True, "conciseness": True}


def _lenient_ragas(data: dict[str, Any]) -> dict[str, Any]:
    if "statements" in data:
        ctx = _numbers(data["context"])
        return {
            "statements": [
                {"statement": s, "reason": "numbers", "verdict": int(any(n in s for n in ctx))}
                for s in data["statements"]
            ]
        }
    if "context" in data:
        ok = any(n in data["answer"] for n in _numbers(data["context"]))
        return {
            "classifications": [
                {"statement": data["answer"], "reason": "numbers", "attributed": int(ok)}
            ]
        }
    return _ragas(data)


def _rubric(case: dict[str, Any]) -> dict[str, bool]:
    from tasks.demo.domain import UnverifiableQuestion, verify

    try:
        right = verify(case["question"], case["answer"], contexts=case.get("context") or [])
    except UnverifiableQuestion:
        right = 0.0
    short = len(case["answer"].split()) <= 12
    return {"accuracy": right == 1.0, "completeness": True, "clarity": True, "conciseness": short}


def _ragas(data: dict[str, Any]) -> dict[str, Any]:
    if "statements" in data:  # NLI: is each statement supported by the context?
        ctx = _numbers(data["context"])
        return {
            "statements": [
                {"statement": s, "reason": "numbers", "verdict": int(_numbers(s) <= ctx)}
                for s in data["statements"]
            ]
        }
    if "context" in data:  # context recall: is the reference attributable to the context?
        ok = _numbers(data["answer"]) <= _numbers(data["context"])
        return {
            "classifications": [
                {"statement": data["answer"], "reason": "numbers", "attributed": int(ok)}
            ]
        }
    return {"statements": [data["answer"]] if data["answer"].strip() else []}


def grade(messages: list[dict[str, str]], flaw: str | None = None) -> dict[str, Any]:
    """The JSON a good judge model would return for ``messages`` (or a flawed one: ``flaw``)."""
    last = messages[-1]["content"]
    if '{"reference"' in messages[0]["content"]:  # asked for a reference answer
        from tasks.demo.domain import UnverifiableQuestion, expected_answer

        try:
            return {"reference": expected_answer(json.loads(last)["question"], [])}
        except UnverifiableQuestion:
            return {"reference": ""}
    match = _RAGAS_INPUT.search(last)
    if match:
        data = json.loads(match.group(1))
        return _lenient_ragas(data) if flaw else _ragas(data)
    case = json.loads(last)
    return _lenient_rubric(case) if flaw else _rubric(case)


class FakeJudgeServer:
    """``with FakeJudgeServer(delay_s=0.2) as server: server.base_url``."""

    def __init__(
        self,
        *,
        delay_s: float = 0.2,
        failure_rate: float = 0.0,
        seed: int = 0,
        flaw: str | None = None,
    ) -> None:
        if flaw is not None and flaw not in FLAWS:
            raise ValueError(f"unknown flaw {flaw!r} (known: {', '.join(FLAWS)})")
        self.flaw = flaw
        self.delay_s = delay_s
        self.failure_rate = failure_rate
        self._rng = random.Random(seed)
        self.outcomes: Counter[str] = Counter()
        self.inflight = 0
        self.max_inflight = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    @property
    def requests(self) -> int:
        return sum(self.outcomes.values())

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            try:
                await asyncio.sleep(self.delay_s)
                return self._reply(body)
            finally:
                self.inflight -= 1

        return app

    def _reply(self, body: dict[str, Any]) -> JSONResponse:
        roll = self._rng.random()
        if roll < self.failure_rate / 2:
            self.outcomes["error_500"] += 1
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        if roll < self.failure_rate:
            self.outcomes["malformed"] += 1
            content = '{"accuracy": "maybe"' if roll < self.failure_rate * 0.75 else '{"x": 1}'
        else:
            self.outcomes["ok"] += 1
            content = json.dumps(grade(body["messages"], self.flaw))
        return JSONResponse(
            {
                "id": f"chatcmpl-{self.requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
        )

    def start(self) -> FakeJudgeServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", lifespan="off", backlog=512)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake judge server did not start")
            time.sleep(0.01)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeJudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """``python -m tests.fakes.judge_server --delay 0.2``: serve until killed; prints the URL."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument("--flaw", choices=FLAWS, default=None, help="serve an exploitable judge")
    args = parser.parse_args()
    server = FakeJudgeServer(
        delay_s=args.delay, failure_rate=args.failure_rate, flaw=args.flaw
    ).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
