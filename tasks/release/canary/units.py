"""The unit each canary rail counts in: requests clustered by user are not independent trials.

Routing is sticky per user, so a user's requests all land on one version. A user whose own
requests are slow (long prompts, a far region) brings a cluster of slow requests to one side:
counted as independent requests, the p99 rail's slow-request test failed an identical
candidate in 3-7 % of steps (per-user latency scales with a spread of e^0.5, heavy users
with Zipf activity) against a 0.25 % budget. The latency rail therefore weighs each version's
slow requests by its users per request (:func:`users_per_request`) where the gateway's count
of users over each latency bound (``agent_slow_voices_total``) was not read: the design
effect of requests clustered by user taken on average, a user as one trial (effective
sample = requests / requests per user = users).

Errors are compared as request-level rates, which do not saturate: counted as "users who met
at least one error", a user with 50-100 requests a step met one on either version, so a 3x
regression read as 1.15x. A user retrying a failing request must still not count as a hundred
errors, so a version's errors count at most as the users who met one times its requests per
user (:func:`error_evidence`): errors spread over users count in full, errors concentrated on
a few users count as those users' share of the requests.

``users`` is the voice series (``agent_voices_total``): each user's first
``FLYWHEEL_GATEWAY__VOICES_PER_STEP`` requests of a step (default 1: distinct users). With a
larger cap it counts up to that many requests per user and both corrections weaken: keep it
at 1 for the rails' sake. Without a voice series (users 0), a request counts as a user.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.metrics.promql import RouteStats


def users_per_request(stats: RouteStats) -> float:
    """Users over requests (at most 1; 0 with no request): the factor that takes a count of
    requests to the user scale; 1 when no voice series was read (a request, a user)."""
    if stats.requests <= 0:
        return 0.0
    if stats.users <= 0:
        return 1.0
    return min(1.0, stats.users / stats.requests)


def error_evidence(stats: RouteStats) -> tuple[float, float]:
    """(errors, requests) with each user's weight bounded: the errors, but never more than the
    users who met one times the version's requests per user, so one user retrying a failing
    request counts as one user's share of requests, not as a hundred errors (without a voice
    series: errors and requests)."""
    if stats.requests <= 0:
        return 0.0, 0.0
    errors = min(stats.errors, stats.requests)
    if stats.users <= 0:
        return errors, stats.requests
    per_user = max(1.0, stats.requests / stats.users)
    return min(errors, stats.error_users * per_user), stats.requests


def design_effect(c: RouteStats, s: RouteStats) -> float:
    """How many requests' worth of variance one error carries, estimated from how errors
    cluster on users (both versions pooled, as they would be alike). Users differ in how often
    their requests fail (a prompt that trips the model, a broken client) and sticky routing
    hands each version whole users: counted as independent requests, 2 of 40 simulated
    identical releases of 200 users with about 90 requests each (error rates spread
    log-normally between users) failed the error rail. Each user's errors are taken as
    Poisson with a rate spread log-normally between users (:func:`lognormal_spread`): the
    share of users who met no error against the mean per user ``mu`` gives the spread ``sigma``
    (no spread: the share is ``e^-mu``), and the variance is ``1 + mu (e^(sigma^2) - 1)``
    times a Poisson's. The voice series say only how many users met no error, which does not
    tell how heavy the spread's upper tail is; the log-normal's is heavier than a gamma's
    with the same share, so where users' rates are gamma-spread it overstates the variance
    (the cautious side: a gamma spread's shape fitted to the same share understated a
    log-normal spread's 4.2 as 3.5, and 2 of 32 identical releases of 200 heavy users were
    rolled back at the 5 % step's 14 candidate users). At most ``m``, the requests per user (a
    user as one trial); 1 where errors spread as chance spreads them, or without voice
    series."""
    errors = min(c.errors, c.requests) + min(s.errors, s.requests)
    requests, users = c.requests + s.requests, c.users + s.users
    error_users = min(c.error_users + s.error_users, users)
    if users <= 0 or requests <= 0 or errors <= 0 or error_users <= 0:
        return 1.0
    m = max(1.0, requests / users)
    mu = errors / users  # errors per user
    none = 1 - error_users / users  # the share of users who met no error
    if none <= math.exp(-mu) or none >= 1:
        return 1.0
    sigma = lognormal_spread(mu, none)
    return min(m, 1 + mu * math.expm1(min(sigma * sigma, 50.0)))


def lognormal_spread(mu: float, none: float) -> float:
    """The ``sigma`` of users' log-normal error rates (mean ``mu``) at which a share ``none``
    of Poisson users meets no error: ``E[exp(-mu e^(sigma Z - sigma^2 / 2))] = none`` over a
    standard normal ``Z`` (Gauss-Hermite quadrature), the share growing with ``sigma``."""
    import numpy as np

    nodes, weights = np.polynomial.hermite_e.hermegauss(40)  # for a standard normal, once
    weights = weights / weights.sum()
    lo, hi = 0.0, 6.0
    for _ in range(60):
        mid = (lo + hi) / 2
        share = float(np.sum(weights * np.exp(-mu * np.exp(mid * nodes - mid * mid / 2))))
        if share < none:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def paired_error_evidence(
    c: RouteStats, s: RouteStats
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Both versions' (errors, trials) for the error tests: :func:`error_evidence` (each user's
    weight bounded) divided by the :func:`design_effect` of the two, so a test counts as many
    independent trials as the clustering of errors on users leaves."""
    d = design_effect(c, s)
    (ec, nc), (es, ns) = error_evidence(c), error_evidence(s)
    return (ec / d, nc / d), (es / d, ns / d)


def error_rate(stats: RouteStats) -> float | None:
    """The error rate the rails compare (:func:`error_evidence`'s errors over its requests):
    the request-level rate, lower where errors cluster on few users; None with no request."""
    errors, requests = error_evidence(stats)
    return errors / requests if requests > 0 else None


FEEDBACK_SCALE = {1: 1.0, 0: 0.5, -1: 0.0}  # feedback value -> the reward's scale


def _feedback_moments(stats: RouteStats) -> tuple[float, float, float]:
    """(events, mean, variance) of feedback on the reward's scale (up 1, neutral 0.5, down 0)."""
    n = stats.feedback_count
    if n <= 0:
        return 0.0, 0.0, 0.0
    mean = sum(FEEDBACK_SCALE.get(k, 0.5) * w for k, w in stats.feedback.items()) / n
    second = sum(FEEDBACK_SCALE.get(k, 0.5) ** 2 * w for k, w in stats.feedback.items()) / n
    return n, mean, max(second - mean * mean, 0.0)


def pooled_feedback(
    c: RouteStats, s: RouteStats
) -> tuple[float, float, float, float, float] | None:
    """(candidate events, mean, stable events, mean, variance of all events as one sample): the
    variance under H0, one feedback distribution for both versions. Each side's own variance
    made two small unanimous samples look certain (3 thumbs down against 4 up: p = 0.013, below
    Fisher's exact 0.029; pooled: p = 0.53). None when a side has no feedback."""
    nc, mc, vc = _feedback_moments(c)
    ns, ms, vs = _feedback_moments(s)
    if nc <= 0 or ns <= 0:
        return None
    n = nc + ns
    mean = (nc * mc + ns * ms) / n
    second = (nc * (vc + mc * mc) + ns * (vs + ms * ms)) / n
    return nc, mc, ns, ms, max(second - mean * mean, 0.0)
