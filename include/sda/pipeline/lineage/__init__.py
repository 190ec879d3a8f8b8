"""``sda trace ALERT_ID``: what an alert came from, by the ids carried from source to sink. One module per hop:

    alert (gold.alerts / alert_events)                                                      :mod:`.alert`
      -> the conjunction it was raised from (gold.conjunctions, by event_id: pair, TCA, screening run)
      -> per object, the orbit the alert used (its ``*_cov_source``): a fused orbit (gold.fused_orbits, by
         fused_id: window, fit, and the correlated observations it was fitted to) or the catalogue's
         element set with the modelled covariance                                           :mod:`.orbit`
      -> per object, the catalogue state the screening used: the newest element set (gold.catalog)
         loaded before that screening finished, and the newest per-object state window (gold.object_state)
         starting before the screening -- the residuals behind the covariance of the Pc    :mod:`.objects`
      -> the observations correlated with each object by the correlate runs that had finished when
         the screening ran (gold.correlated, ops.run_metrics)                               :mod:`.objects`
      -> their bronze records (bronze_id -> source_file, record_no, ingest batch)           :mod:`.sources`
      -> the landing files (ops.ingested_files: path, sha256, size, the run that ingested it)  :mod:`.sources`

:mod:`.command` is the command: it prints the trace as JSON or text. Every hop is a key lookup: obs_id and
bronze_id travel with each row from bronze to gold, and the bronze_id is sha256(landing file sha256, record
number), so a record can be found again in its file. The names other packages use are re-exported here.
"""

from sda.pipeline.lineage.alert import TraceError, trace
from sda.pipeline.lineage.command import main, render
from sda.pipeline.lineage.objects import element_set_used, element_sets_used
from sda.pipeline.lineage.orbit import orbit_used

__all__ = ["TraceError", "trace", "main", "render", "element_set_used", "element_sets_used", "orbit_used"]
