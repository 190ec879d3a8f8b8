"""The operator every pipeline task uses: ``spark-submit jobs/<stage>.py`` with the ``sda`` package shipped.

:class:`SdaSparkSubmitOperator` is the Spark provider's ``SparkSubmitOperator`` plus one step at
execution time: it builds (or reuses) the content-addressed zip of ``include/sda``
(:func:`sda.dist.package_zip`) and passes it as ``--py-files``, so executors on a cluster import
exactly the code the driver runs, whatever is installed on the worker machines. Building it in
``execute`` rather than at DAG-parse time keeps parsing free of file writes, and a DAG run picks up
the code as it is when each task starts. Everything else (connection, jars, conf, environment) is
the shared configuration of :func:`sda.airflow_support.submit_kwargs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from sda import dist


class SdaSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that ships the ``sda`` package zip with ``--py-files``.

    :param dist_dir: where the zip is written (default: ``dist`` beside the jar cache, under ``var/``)
    """

    def __init__(self, *, dist_dir: str | Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dist_dir = str(dist_dir)

    def execute(self, context: Any) -> None:
        shipped = str(dist.package_zip(Path(self.dist_dir)))
        others = [p for p in (self.py_files or "").split(",") if p]
        self.py_files = ",".join([shipped, *others])
        self.log.info("shipping the sda package to the executors: --py-files %s", self.py_files)
        return super().execute(context)
