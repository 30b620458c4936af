"""The anonymiser: personal-data detection and redaction of texts (Presidio on offline spaCy
pipelines, plus kiwipiepy for Korean), used by curate (stage 3, the training examples), by
release (the PII-leak check of a candidate's answers) and by ``flywheel pii-eval``.

It depends on ``infra`` only, never on a stage package. Modules:
:mod:`~tasks.pii.engine` (the engine, :class:`~tasks.pii.engine.PiiConfig`, ``analyze_texts``
and ``anonymize_texts``), :mod:`~tasks.pii.normalize` (Unicode folding with offsets mapped
back), :mod:`~tasks.pii.recognizers` (the recognisers added to Presidio's) built from
:mod:`~tasks.pii.span_recognizer`, :mod:`~tasks.pii.shapes` (identifier shapes: the rules of
:mod:`~tasks.pii.identifiers` and the secrets of :mod:`~tasks.pii.secrets`),
:mod:`~tasks.pii.names`, :mod:`~tasks.pii.name_spans` and :mod:`~tasks.pii.greetings` (names),
:mod:`~tasks.pii.addresses` (street addresses), :mod:`tasks.pii.korean` (the Korean pipeline)
and :mod:`~tasks.pii.evaluation` (the anonymiser scored on a labelled file).
"""
