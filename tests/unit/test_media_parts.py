"""Media content parts: a multimodal model server fetches the URLs of ``image_url``,
``video_url`` and ``audio_url`` parts, from inside the network. The gateway refuses them with a
400 that says why unless FLYWHEEL_GATEWAY__ALLOW_MEDIA, and then takes only inline ``data:``
URLs unless a URL is under FLYWHEEL_GATEWAY__MEDIA_URL_PREFIXES. Text parts, the shape many
SDKs send, stay as they are."""

from __future__ import annotations

from typing import Any

import pytest

from infra.gateway.chat_request import BadRequest, ChatLimits, parse_chat_request

INTERNAL = "http://minio:9000/flywheel/deploy/state.json"  # a compose service's address
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def parse(content: Any, **options: Any) -> Any:
    body = {
        "messages": [
            {"role": "system", "content": "You read receipts."},
            {"role": "user", "content": content},
        ]
    }
    limits = ChatLimits(max_tokens_limit=512, max_messages=64, **options)
    return parse_chat_request(body, limits=limits, session_header=None)


def image(url: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "What is the total on this receipt?"},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
    ]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": INTERNAL}},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "video_url", "video_url": {"url": "http://10.0.0.5/clip.mp4"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
    ],
)
def test_media_parts_are_refused_by_default_with_the_setting_named(part: dict[str, Any]) -> None:
    with pytest.raises(BadRequest, match="FLYWHEEL_GATEWAY__ALLOW_MEDIA"):
        parse([{"type": "text", "text": "Look at this"}, part])


def test_text_parts_and_plain_strings_are_untouched() -> None:
    req = parse([{"type": "text", "text": "Order A-1042: where is it?"}])
    assert req.messages[1]["content"] == [{"type": "text", "text": "Order A-1042: where is it?"}]
    assert parse("Order A-1042, customer Dana Reyes").question.startswith("Order A-1042")


def test_allowed_media_takes_data_urls_only_unless_a_prefix_is_listed() -> None:
    assert parse(image(PNG), allow_media=True).messages[1]["content"][1]["image_url"]["url"] == PNG
    with pytest.raises(BadRequest, match="data: URLs"):
        parse(image(INTERNAL), allow_media=True)
    with pytest.raises(BadRequest, match="data: URLs"):
        parse(
            image("https://cdn.example.com.attacker.net/x.png"),
            allow_media=True,
            media_url_prefixes=("https://cdn.example.com/",),
        )
    ok = parse(
        image("https://cdn.example.com/r/1.png"),
        allow_media=True,
        media_url_prefixes=("https://cdn.example.com/",),
    )
    assert ok.messages[1]["content"][1]["image_url"]["url"] == "https://cdn.example.com/r/1.png"
    with pytest.raises(BadRequest, match="file_id"):
        parse([{"type": "file", "file": {"file_id": "file-abc"}}], allow_media=True)


def test_an_unknown_part_type_is_refused_even_with_media_allowed() -> None:
    with pytest.raises(BadRequest, match="not accepted"):
        parse([{"type": "image_file", "image_file": {"file_id": "x"}}], allow_media=True)
