"""Airflow glue, imported only by ``dags/``, ``plugins/`` and the scheduler: the stage operator
(:mod:`.operators`), the configuration every DAG shares (:mod:`.airflow_support`), the landing-zone event
trigger (:mod:`.landing_watch`), the reports web app the API server serves (:mod:`.webapp`) and the
executor whose task processes start with the stages' libraries imported (:mod:`.executor`), and the
local stack ``make run`` starts, listening on this machine only (:mod:`.local_stack`)."""
