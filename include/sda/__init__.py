"""sda-fusion: space-domain-awareness sensor fusion. The packages, bottom layer first (each imports only
from the ones above it in this list; ``pyproject.toml``'s import-linter contracts check it):

* :mod:`sda.config`: settings and safe paths (standard library only)
* :mod:`sda.orbit`: orbit mathematics (frames, element sets, sensors, uncertainty, correlation,
  screening, Pc); no Spark, no Airflow
* :mod:`sda.lake`: the Spark Connect server, sessions, Delta tables and schemas
* :mod:`sda.pipeline`: the operator graph and the runtime the jobs share
* :mod:`sda.transforms`: the wire formats and the observation envelope
* :mod:`sda.alerts`, :mod:`sda.quality`, :mod:`sda.sim`: alerting and CDMs, quality gates and
  reports, the sensor simulator (independent of one another)
* :mod:`sda.cli`: the ``sda`` command line
* :mod:`sda.orchestration`: Airflow glue, imported only by ``dags/`` and ``plugins/``

The stage jobs themselves are ``jobs/<stage>.py``; nothing in ``sda`` imports them.
"""
