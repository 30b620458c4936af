"""A JSON body's shape, measured on its bytes before it is parsed: how deep its arrays and
objects nest, and how many there are (brackets inside strings are text, not counted).

Parsing is what such bodies cost: 4 MB of nested or side-by-side empty lists took orjson
0.5-0.8 s and the walk that measured the parsed value's depth another second, all on the
event loop (eight at once held ``/livez`` for 6 s). Here the bytes are reduced to their
quotes and brackets in one C pass (``bytes.translate``), and the depth and count are taken
with numpy (a running sum of the brackets outside strings) in time linear in the body,
without Python work per byte; a body above ``INLINE_BYTES`` is measured in one scanner
thread (numpy lets go of the GIL), so the loop goes on serving meanwhile. A body over either
limit is refused before it is parsed.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

MAX_CONTAINERS = 65_536  # arrays and objects in one request; a long agent run needs ~10,000
INLINE_BYTES = 64 * 1024  # bodies up to this are measured on the loop (well under a ms)

_KEPT = b'"[]{}'
_ESCAPES = b"\\"
_DROP = bytes(c for c in range(256) if c not in _KEPT)  # translate() deletes these
_DROP_ALL_BUT_ESCAPES = bytes(c for c in range(256) if c not in _KEPT + _ESCAPES)
_STEP = np.zeros(256, dtype=np.int8)  # +1 for an opening bracket, -1 for a closing one
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def shape_problem(body: bytes, *, max_depth: int, max_containers: int) -> str | None:
    """None when ``body`` nests at most ``max_depth`` levels (the outermost array or object
    is level 1) and holds at most ``max_containers`` arrays and objects; else one line that
    says which limit it breaks. Invalid JSON is the parser's to refuse (a body that is not
    JSON may pass here, or be refused by a limit)."""
    marks = body.translate(None, _DROP_ALL_BUT_ESCAPES)
    if len(marks) <= max_depth:
        return None  # the common chat body: a few dozen brackets and quotes at most
    if _ESCAPES in marks:
        # an escaped quote or backslash is text: dropped before the quotes are paired
        # (pairs taken from the left, as a JSON reader does)
        marks = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DROP)
    codes = np.frombuffer(marks, dtype=np.uint8)
    steps = _STEP[codes]
    if b'"' in marks:
        # inside a string after an odd number of quotes: its brackets count for nothing
        quotes = np.cumsum(codes == ord('"'), dtype=np.int32)
        steps[(quotes & 1).astype(bool)] = 0
    depth = int(np.cumsum(steps, dtype=np.int32).max(initial=0))
    if depth > max_depth:
        return f"the body is nested deeper than {max_depth} levels"
    if int(np.count_nonzero(steps == 1)) > max_containers:
        return f"the body holds more than {max_containers} JSON arrays and objects"
    return None


# one thread measures the large bodies, one after another: the few steps that hold the GIL
# (bytes.translate, numpy's setup) then alternate with the loop alone, where eight threads at
# once made it wait for the GIL for a tenth of a second; one at a time is also no slower in
# all for a CPU-bound job
_SCANNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="json-shape")


async def body_shape_problem(
    body: bytes, *, max_depth: int, max_containers: int = MAX_CONTAINERS
) -> str | None:
    """:func:`shape_problem`, in the scanner thread for a body above ``INLINE_BYTES``."""
    if len(body) <= INLINE_BYTES:
        return shape_problem(body, max_depth=max_depth, max_containers=max_containers)
    scan = partial(shape_problem, body, max_depth=max_depth, max_containers=max_containers)
    return await asyncio.get_running_loop().run_in_executor(_SCANNER, scan)
