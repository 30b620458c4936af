"""The release state machine, its transitions and controls, the release and rollback steps."""
