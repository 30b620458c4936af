"""``POST /v1/feedback``: a vote on a trace the gateway served
(:class:`~infra.gateway.feedback.FeedbackDesk`), as a plain Starlette route."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from infra.gateway.parts import parts

router = APIRouter()


async def post_feedback(request: Request) -> Response:
    """The vote, checked and counted by the feedback desk."""
    return await parts(request).feedback.handle(request)


router.add_route("/v1/feedback", post_feedback, methods=["POST"])
