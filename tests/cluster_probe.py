"""A tiny Spark application for tests/test_cluster.py: which ``sda`` do the executors import?

    spark-submit tests/cluster_probe.py OUT.json

Writes the master URL and, per executor task, the file ``sda`` was imported from and the host. With
``--py-files sda-<hash>.zip`` (what :class:`sda.operators.SdaSparkSubmitOperator` adds) that file
lies inside the zip.
"""

import json
import sys

from pyspark.sql import SparkSession


def where(batches):
    import socket

    import pandas as pd

    import sda

    for batch in batches:
        yield pd.DataFrame({"file": [sda.__file__] * len(batch), "host": [socket.gethostname()] * len(batch)})


if __name__ == "__main__":
    spark = SparkSession.builder.appName("sda-cluster-probe").getOrCreate()
    rows = spark.range(8, numPartitions=4).mapInPandas(where, "file string, host string").distinct().collect()
    with open(sys.argv[1], "w") as out:
        json.dump({"master": spark.sparkContext.master, "executor_sda": sorted({r.file for r in rows})}, out)
    spark.stop()
