"""The online analysis: the shadow phase and the canary steps, their tests and guard rails."""
