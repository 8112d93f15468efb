"""Project-wide pytest configuration: Hypothesis profiles.

The "ci" profile is loaded unless ``HYPOTHESIS_PROFILE`` names another: no per-example
deadline (the machine is shared, so timing is noise) and modest example counts so the
whole suite stays well under the project's time budget. "dev" is quicker still,
"thorough" is for hunting bugs locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile("thorough", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
