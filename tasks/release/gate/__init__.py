"""The offline gate: the candidate against its baseline on the golden set, and its evidence."""
