"""Stage 5, release, in three parts: ``gate`` (the offline gate on the golden set: the paired
comparison, its drift, leak and hacking checks, its report and its agreement with the canary),
``canary`` (the online analysis: the shadow phase, each canary step's sequential test and guard
rails) and ``machine`` (the state machine and its guarded transitions, a person's controls, the
steps of the ``release`` and ``rollback`` flows); beside them what more than one part reads:
the gate's and the rails' verdicts (``verdict``), the paired test (``stats``) and a run's
knobs (``options``)."""
