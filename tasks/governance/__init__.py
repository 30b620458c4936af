"""Governance: forget a user (:mod:`.erasure`), raw-data retention (:mod:`.retention`),
physical deletion in Iceberg (:mod:`.maintenance`: snapshot expiry, orphan files under the
table lease) and erasure in Langfuse (:mod:`.langfuse`).

Import the modules themselves: this file imports nothing.
"""
