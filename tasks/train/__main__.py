"""``python -m tasks.train select|train|publish`` (``train`` under ``accelerate launch``):
the trainer on its own with the flow's data selection (see :mod:`tasks.train.recipe`)."""

import logging

from tasks.train.recipe import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, force=True)
    main()
