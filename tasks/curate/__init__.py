"""Stage 3 logic: quality gates, dedup, consent, anonymisation, k-anonymity, one Iceberg commit.

Order (cheap before expensive; nothing personal leaves this package un-anonymised):
consent -> gates (errors, latency, reward) -> dedup -> role (``train`` / ``rejected_only``)
-> Presidio on the survivors -> k-anonymity -> ``training_examples`` (replace the window).

Modules, in that order: :mod:`~tasks.curate.gates` (join with scores, gates, consent, dedup),
:mod:`~tasks.curate.anonymize` (rollout rows -> anonymised training_examples rows, with the
engine of :mod:`tasks.pii`), :mod:`~tasks.curate.kanon` (k-anonymity and the held rows),
:mod:`~tasks.curate.commit` (the Iceberg commit and the audit events) and
:mod:`~tasks.curate.summary` (the run's counts and artifact). Each module holds its plain
functions and, next to them, their thin ``@task`` wrappers.
"""
