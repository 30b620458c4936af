"""A user's package of reward verifiers (loaded by the tests through PYTHONPATH)."""
