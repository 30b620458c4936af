"""Stage 5, release: the state machine and its transitions (``machine``), a person's controls
(``controls``), the golden-set regression gate (``gate``) with its drift checks (``drift``)
and report (``report``), the shadow and canary analysis (``rollout``, ``canary``) with the
canary's guard rails as one list (``rails``), and the steps of one ``release`` flow run
(``steps``) with the gate's inputs (``gate_inputs``)."""
