"""Recognisers of identifiers, contacts, secrets and addresses that apply to every language, and
the structure-aware reading of tool results (JSON, tables, key=value records)."""
