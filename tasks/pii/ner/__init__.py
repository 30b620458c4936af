"""Recognisers built on the spaCy model's named entities and part-of-speech tags."""
