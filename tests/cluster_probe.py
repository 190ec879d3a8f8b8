"""Which ``sda`` do a cluster's Python workers import? (tests/test_cluster.py)

:func:`probe` runs a tiny ``mapInPandas`` on a Spark Connect session and returns the server's master
URL and, per task, the file ``sda`` was imported from. With the ``sda`` zip added to the session as a
Python artifact (what :class:`sda.orchestration.operators.SdaStageOperator` does on a cluster) that file lies
inside the zip.
"""

from __future__ import annotations


def probe(spark) -> dict:
    def where(batches):  # nested: pickled by value, the cluster's workers have no `tests` package
        import socket

        import pandas as pd

        import sda

        for batch in batches:
            yield pd.DataFrame({"file": [sda.__file__] * len(batch), "host": [socket.gethostname()] * len(batch)})

    rows = spark.range(8, numPartitions=4).mapInPandas(where, "file string, host string").distinct().collect()
    return {"master": spark.conf.get("spark.master"), "executor_sda": sorted({r.file for r in rows})}
