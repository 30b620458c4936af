"""OpenAI-compatible model servers as the gateway and the release gate call them: the HTTP/1.1
client (:mod:`infra.upstream.http1`), the completion types and SSE reading
(:mod:`infra.upstream.completion`), and the upstreams by version (:mod:`infra.upstream.upstreams`).
Knows nothing of the gateway."""
