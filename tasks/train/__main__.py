"""``python -m tasks.train`` / ``accelerate launch -m tasks.train``: the trainer on its own
(see :mod:`tasks.train.trainer`)."""

import logging

from tasks.train.trainer import _main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, force=True)
    _main()
