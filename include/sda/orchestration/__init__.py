"""Airflow glue, imported only by ``dags/`` and ``plugins/``: the stage operator (:mod:`.operators`),
the configuration every DAG shares (:mod:`.airflow_support`), the landing-zone event trigger
(:mod:`.landing_watch`) and the reports web app the API server serves (:mod:`.webapp`)."""
