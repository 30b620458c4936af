"""The learned name layer: generated training text, the training script and its recogniser."""
