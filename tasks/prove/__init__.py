"""``flywheel prove``: does the loop's reward, and not only its plumbing, make the model better?

One shared set of traffic from the base model, then several arms trained with the same
budget and scored on the same golden items (:mod:`.arms`), over several seeds, with a
confidence interval per arm and a paired test of the loop against a shuffled-reward control
(:mod:`.stats`); the report and chart are :mod:`.report`. Orchestrated by ``flows/prove.py``.
"""
