"""Every adapter of flywheel to the outside world.

Importing this package switches off the phone-home and hub downloads of the ML libraries for
the whole process (unless already configured): flows run by a Prefect worker never pass
through the CLI, and nothing may reach a model hub at run time. The variables must be set
before ``huggingface_hub`` is imported, which reads them once.
"""

from __future__ import annotations

import os

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "RAGAS_DO_NOT_TRACK": "true",
}
for _key, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)
