"""The Python that a local-mode Spark session runs its Python workers with.

Spark starts its Python workers with ``PYSPARK_PYTHON``, or ``python3`` from ``PATH``
when that is not set. A program run with a virtual environment's interpreter without
activating it (``.venv/bin/python job.py``) then gets workers of another Python, which
lack coopconsumer: a read failed with "No module named 'coopconsumer'" (issue 35). In
local mode the workers run on this machine, so this interpreter is the right one.

Imports nothing of pyspark: it reads the session it is given.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["use_this_python_locally"]

log = logging.getLogger("coopconsumer.spark")


def use_this_python_locally(spark: Any) -> None:
    """Make a local-mode session's Python workers run ``sys.executable`` unless the
    user chose (``PYSPARK_PYTHON``, ``spark.pyspark.python``). A cluster's executors
    are left alone: their Python is the deployment's (docs/spark.md, "Running on a
    cluster")."""
    context = getattr(spark, "sparkContext", None)
    master = str(getattr(context, "master", "") or "")
    if context is None or not master.startswith("local"):
        return
    if os.environ.get("PYSPARK_PYTHON"):
        return
    try:
        chosen = context.getConf().get("spark.pyspark.python")
    except Exception:  # a stub or a stopped context: nothing to decide
        return
    if chosen or getattr(context, "pythonExec", None) == sys.executable:
        return
    log.info(
        "local Spark master: Python workers run %s (this interpreter; set PYSPARK_PYTHON "
        "to choose another)",
        sys.executable,
    )
    context.pythonExec = sys.executable
