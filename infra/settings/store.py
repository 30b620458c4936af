"""Where the platform keeps its data: the check that ``FLYWHEEL_STORE_URL`` is a directory
path, ``file:///path`` or ``s3://bucket[/prefix]``."""

from __future__ import annotations

import re

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_store_url(url: str) -> str:
    """``url`` if it is a directory path, ``file:///path`` or ``s3://bucket[/prefix]``.

    Raises:
        ValueError: anything else (``::bad::`` would otherwise become a directory of that name).
    """
    expected = "expected a directory path, file:///path or s3://bucket/prefix"
    scheme, sep, rest = url.partition("://")
    if not sep:
        if not url.strip() or ":" in url:
            raise ValueError(f"not a directory path or URL; {expected}")
        return url
    if scheme == "file" and rest.startswith("/"):
        return url
    if scheme == "s3" and _BUCKET.match(rest.split("/", 1)[0]):
        return url
    if scheme == "s3":
        raise ValueError(f"no valid bucket name after s3://; {expected}")
    raise ValueError(f"unsupported URL scheme {scheme + sep!r}; {expected}")
