"""``python -m infra.gateway``: serve the gateway with the settings from the environment."""

from __future__ import annotations

import logging

from infra.gateway.serve import serve_gateway
from infra.settings import get_settings, prepare_environment

if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    serve_gateway(prepare_environment(get_settings()))
