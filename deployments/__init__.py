"""The ways a flow gets started: prefect.yaml (schedules, work pools), serve.py (one-machine
``prefect serve`` of every deployment) and the ``flywheel`` command (cli.py, commands.py)."""
