"""The anonymiser: personal-data detection and redaction of texts (Presidio on offline spaCy
pipelines, plus kiwipiepy for Korean), used by curate (stage 3, the training examples), by
release (the PII-leak check of a candidate's answers) and by ``flywheel pii-eval``.

It depends on ``infra`` only, never on a stage package. Its shape:
:mod:`~tasks.pii.engine` (the engine, :class:`~tasks.pii.engine.PiiConfig`, ``analyze_texts``
and ``anonymize_texts``), :mod:`~tasks.pii.registry` (the one list of recognisers and their
languages), the recognisers by family (:mod:`~tasks.pii.generic`: identifiers, contacts,
secrets, addresses, tool-result structure; :mod:`~tasks.pii.names`: names by the words
around them; :mod:`~tasks.pii.ner`: the spaCy model's names; :mod:`~tasks.pii.korean`: Korean
text), built from :mod:`~tasks.pii.span_recognizer`; :mod:`~tasks.pii.lexicon` (every word
list, as data), :mod:`~tasks.pii.normalize` (Unicode folding with offsets mapped back) and
:mod:`~tasks.pii.evaluation` (the anonymiser scored on a labelled file).
"""
