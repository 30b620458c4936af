"""Stage 5, release: the state machine and its transitions (``machine``), a person's controls
(``controls``), the golden-set regression gate (``gate``) with its drift checks (``drift``)
and report (``report``), and the shadow and canary analysis (``rollout``)."""
