"""Stage 4 (train): preference pairs from curated rows (:mod:`.pairs`), the TRL trainer
(:mod:`.trainer`), the base model and the published checkpoint (:mod:`.checkpoints`), and the
lineage every checkpoint carries (:mod:`.lineage`).

Import the modules themselves: this file imports nothing, so reading a lineage never loads
the trainer.
"""
