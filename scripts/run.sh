#!/usr/bin/env bash
# `make run`: start Airflow with the pipeline, feed it three hours of simulated sensors (with an
# injected near-collision), process them end to end (orbits fused from the observations), judge the
# alerts against the simulator's truth, print where everything landed, then keep the simulated sensors
# reporting (sda.sim.feed: files land as the sensors deliver them, and each landing starts a run) with
# Airflow and its Spark Connect server running, until Ctrl-C. A second `make run` resumes the same sky
# where it was left (at most its last 3 hours observed; more than 3 days ago: `make clean` first).
#
#   SDA_EXIT_AFTER_RUN=1 bash scripts/run.sh    stop Airflow after the run; exit 0 on success, 1 on failure
#   RUN_TIMEOUT_S=1800                           how long to wait for the run (default 30 minutes)
#   SIM_HOURS=3                                  hours of simulated tracking before the first run (default 3)
#   SIM_RADAR_CADENCE_S=20                       seconds between a simulated radar's frames (default 20)
#   SIM_SKY=harsh|storm|kind                     sensor biases, heavy-tailed noise, space weather and tumbling
#                                                debris (default harsh); storm: with a geomagnetic storm; kind:
#                                                white noise at the registry's sigmas (docs/simulator.md)
#   CATALOG=path/to/file.tle                     simulate over your own TLE/OMM catalogue (default: a
#                                                generated one); either way it is copied to SDA_CATALOG_FILE
set -euo pipefail
cd "$(dirname "$0")/.."
EXIT_AFTER_RUN="${SDA_EXIT_AFTER_RUN:-0}"
unset SDA_EXIT_AFTER_RUN  # not a pipeline setting: load_settings() refuses unknown SDA_* variables
# shellcheck source=scripts/airflow_env.sh
source scripts/airflow_env.sh
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-1800}"
API="$AIRFLOW__API__BASE_URL"
DAG_ID=sda_pipeline
PY="$SDAF_ROOT/.venv/bin/python"
LOG="$AIRFLOW_HOME/airflow.log"
PASSWORD_FILE="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
AIRFLOW_PID=""
FEED_PID=""
SERVER_STARTED=0

say() { printf '\n==> %s\n' "$*"; }
die() { printf '\nrun.sh: %s\n' "$*" >&2; exit 1; }
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

stop_airflow() {
    # the local stack leads its own process group (set -m below): signal the whole group, or its scheduler,
    # API server and workers can outlive it and keep the port
    if [[ -n "$AIRFLOW_PID" ]] && kill -0 -- "-$AIRFLOW_PID" 2>/dev/null; then
        echo "stopping Airflow (process group $AIRFLOW_PID)..."
        kill -INT "$AIRFLOW_PID" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 "$AIRFLOW_PID" 2>/dev/null || break; sleep 1; done
        kill -TERM -- "-$AIRFLOW_PID" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 -- "-$AIRFLOW_PID" 2>/dev/null || break; sleep 1; done
        kill -KILL -- "-$AIRFLOW_PID" 2>/dev/null || true
        wait "$AIRFLOW_PID" 2>/dev/null || true
    fi
    AIRFLOW_PID=""
}
stop_all() {
    if [[ -n "$FEED_PID" ]]; then  # the simulated sensors first: nothing lands while Airflow stops
        kill -TERM "$FEED_PID" 2>/dev/null || true
        wait "$FEED_PID" 2>/dev/null || true
        FEED_PID=""
    fi
    stop_airflow
    if [[ "$SERVER_STARTED" == 1 ]]; then
        "$PY" -m sda.lake.server stop || true
        SERVER_STARTED=0
    fi
}
trap stop_all EXIT
trap 'exit 130' INT TERM

mkdir -p "$AIRFLOW_HOME"
if curl -s -o /dev/null "$API/api/v2/monitor/health"; then
    die "something already listens on $API (another Airflow?); stop it or set AIRFLOW__API__PORT"
fi

# --- 1. simulated sensors ----------------------------------------------------------------------
LANDING_DIR="$("$PY" -c 'from sda.config.settings import load_settings; print(load_settings().landing)')"
set +e
resumed="$("$PY" -m sda.sim.feed catch-up --max-gap-h "${SIM_HOURS:-3}")"
feed_rc=$?
set -e
if [[ $feed_rc == 0 ]]; then
    # A sky left by an earlier `make run` (the landing zone's _feed/state.json): the sensors report the
    # time since, the lakehouse goes on from where it was, and no alert is emitted twice
    read -r SIM_START SIM_END TCA <<<"$resumed"
    say "resumed the simulated sky of the last \`make run\`: observed up to $SIM_END (since $SIM_START: the time it was stopped, up to SIM_HOURS); the pair's TCA $TCA"
elif [[ $feed_rc == 3 ]]; then
    # Three hours of tracking or more, ending now, so that the first run fuses the objects' orbits over
    # several passes and the screening uses them (sda.sim.scenario: a fit-window boundary never leaves
    # less than two hours on both sides); the injected pair's TCA three hours ahead
    read -r SIM_START SIM_END TCA < <("$PY" -m sda.sim.scenario --hours "${SIM_HOURS:-3}")
    # --tle-age-days: the catalogue is 0.5-3 days old and wrong the way real element sets are; the sensors
    # observe the true orbits (sda.sim.tle_error). --radar-cadence: a radar frame every 20 s (the
    # simulator's default is 10 s), which halves the records of the first run and leaves a radar pass
    # dozens of measurements.
    say "simulating sensors $SIM_START .. $SIM_END (injected conjunction, TCA $TCA; catalogue 0.5-3 days old)"
    "$PY" -m sda.sim.simulate --start "$SIM_START" --end "$SIM_END" --landing "$LANDING_DIR" \
        --inject-conjunction --tca "$TCA" --tle-age-days 0.5:3 --radar-cadence "${SIM_RADAR_CADENCE_S:-20}" \
        --sky "${SIM_SKY:-harsh}" ${CATALOG:+--catalog "$CATALOG"}
    "$PY" -m sda.sim.feed init || die "the simulation just written cannot be continued (see above)"
else
    die "cannot resume the simulated sky in $LANDING_DIR (see the message above)"
fi

# The pipeline's settings are the service's whatever the simulated sky: no operator knows the sky it observes
# (every sky's measurements carry light time, and its sensors may be biased)

# --- 2. the Spark Connect server every task runs on ---------------------------------------------
if "$PY" -m sda.lake.server status >/dev/null 2>&1; then
    say "a Spark Connect server already answers at $("$PY" -c 'from sda.config.settings import load_settings; print(load_settings().connect_url)'); using it"
else
    say "starting the Spark Connect server (log: var/spark-connect/)"
    "$PY" -m sda.lake.server start || die "the Spark Connect server did not start (see the message above)"
    SERVER_STARTED=1
fi

# A fresh lakehouse's tables are created while Airflow boots (the first task would otherwise do it)
"$PY" -m sda.cli tables --create >"$AIRFLOW_HOME/tables-create.log" 2>&1 &
TABLES_PID=$!

# --- 3. Airflow --------------------------------------------------------------------------------
say "starting Airflow on $AIRFLOW__API__HOST (log: $LOG)"
# What `airflow standalone` runs (API server, scheduler, dag processor, triggerer), listening on
# SDA_BIND_HOST only, task-log server included (sda.orchestration.local_stack). Its own process group
# (job control on): a background job of a script would ignore SIGINT, and SIGINT is what makes it stop
# its components.
set -m
"$PY" -m sda.orchestration.local_stack >>"$LOG" 2>&1 &
AIRFLOW_PID=$!
set +m

deadline=$((SECONDS + 300))
until curl -sf -o /dev/null "$API/api/v2/monitor/health"; do
    kill -0 "$AIRFLOW_PID" 2>/dev/null || die "Airflow exited during start-up; see $LOG"
    ((SECONDS < deadline)) || die "the API server did not answer on $API within 5 minutes; see $LOG"
    sleep 3
done
until [[ -s "$PASSWORD_FILE" ]]; do
    ((SECONDS < deadline)) || die "no generated password in $PASSWORD_FILE; see $LOG"
    sleep 2
done
PASSWORD="$(json 'd["admin"]' <"$PASSWORD_FILE")"
echo "API server is up at $API"

token() {
    curl -sf -X POST "$API/auth/token" -H 'Content-Type: application/json' \
        -d "{\"username\": \"admin\", \"password\": \"$PASSWORD\"}" | json 'd["access_token"]'
}
TOKEN="$(token)" || die "could not log in as admin with the password from $PASSWORD_FILE"
api() {  # api METHOD PATH [JSON BODY]
    local out
    if ! out="$(curl -sf -X "$1" "$API/api/v2$2" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"})"; then
        TOKEN="$(token)"  # tokens expire: log in again once
        out="$(curl -sf -X "$1" "$API/api/v2$2" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"})"
    fi
    printf '%s' "$out"
}

say "waiting for the dag processor to parse dags/$DAG_ID.py"
until api GET "/dags/$DAG_ID" >/dev/null 2>&1; do
    errors="$(api GET /importErrors | json '"\n".join(e["filename"] + ":\n" + e["stack_trace"] for e in d["import_errors"])' || true)"
    [[ -z "$errors" ]] || die "the DAG does not import:"$'\n'"$errors"
    ((SECONDS < deadline)) || die "$DAG_ID did not appear within 5 minutes; see $LOG"
    sleep 3
done

wait "$TABLES_PID" || die "creating the lakehouse's tables failed: $(tail -3 "$AIRFLOW_HOME/tables-create.log")"

# --- 4. one run over the simulated data --------------------------------------------------------
# The run's data interval is the simulated window up to now: ingest takes the files modified before
# its end. Its run_after is the window's start, so it goes ahead of the run the scheduler starts for
# the latest interval when the DAG is unpaused (catchup is off; max_active_runs is 1).
NOW="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
RUN_ID="manual__make_run__$(date -u +%Y%m%dT%H%M%SZ)"
api POST "/dags/$DAG_ID/dagRuns" "{\"dag_run_id\": \"$RUN_ID\", \"logical_date\": \"$NOW\", \"run_after\": \"$SIM_START\",
    \"data_interval_start\": \"$SIM_START\", \"data_interval_end\": \"$NOW\",
    \"note\": \"make run: simulated sensors $SIM_START .. $SIM_END\"}" >/dev/null || die "could not trigger $DAG_ID"
api PATCH "/dags/$DAG_ID" '{"is_paused": false}' >/dev/null || die "could not unpause $DAG_ID"
say "triggered $RUN_ID (data interval $SIM_START .. $NOW) and unpaused $DAG_ID"

say "waiting for run $RUN_ID (timeout ${RUN_TIMEOUT_S}s)"
started=$SECONDS
state=""
last=""
while :; do
    state="$(api GET "/dags/$DAG_ID/dagRuns/$RUN_ID" | json 'd["state"]')" || state="unknown"
    tasks="$(api GET "/dags/$DAG_ID/dagRuns/$RUN_ID/taskInstances" \
        | json '"  ".join(t["task_id"] + "=" + str(t["state"]) for t in sorted(d["task_instances"], key=lambda t: t["task_id"]))')" || tasks=""
    if [[ "$state $tasks" != "$last" ]]; then
        printf '[%4ds] run %-8s %s\n' "$((SECONDS - started))" "$state" "$tasks"
        last="$state $tasks"
    fi
    [[ "$state" == success || "$state" == failed ]] && break
    if [[ "$EXIT_AFTER_RUN" == 1 ]]; then  # Airflow stops after this run: nothing may start behind it
        for other in $(api GET "/dags/$DAG_ID/dagRuns?state=queued" | RUN_ID="$RUN_ID" json \
                '" ".join(r["dag_run_id"] for r in d["dag_runs"] if r["dag_run_id"] != __import__("os").environ["RUN_ID"])'); do
            api DELETE "/dags/$DAG_ID/dagRuns/$other" >/dev/null && echo "(dropped queued run $other: SDA_EXIT_AFTER_RUN=1)"
        done
    fi
    kill -0 "$AIRFLOW_PID" 2>/dev/null || die "Airflow stopped while the run was in progress; see $LOG"
    if ((SECONDS - started > RUN_TIMEOUT_S)); then state=timeout; break; fi
    sleep 10
done
elapsed=$((SECONDS - started))
if [[ "$EXIT_AFTER_RUN" == 1 ]]; then  # no run may start between this one's end and Airflow's stop
    api PATCH "/dags/$DAG_ID" '{"is_paused": true}' >/dev/null || true
fi

# --- 5. summary --------------------------------------------------------------------------------
eval "$("$PY" - <<'EOF'
from sda.config.settings import load_settings
s = load_settings()
print(f'LAKEHOUSE="{s.lakehouse}" OUTBOX="{s.outbox}" LANDING="{s.landing}"')
EOF
)"
if [[ "$state" != success ]]; then
    failed="$(api GET "/dags/$DAG_ID/dagRuns/$RUN_ID/taskInstances" \
        | json '" ".join(t["task_id"] for t in d["task_instances"] if t["state"] in ("failed", "upstream_failed", "up_for_retry", "running"))' || true)"
    first="${failed%% *}"
    printf '\nrun.sh: run %s ended as %s after %ss (failed or unfinished tasks: %s).\n' "$RUN_ID" "$state" "$elapsed" "${failed:-none}" >&2
    if [[ -n "$first" ]]; then
        echo "  task log: $AIRFLOW_HOME/logs/dag_id=$DAG_ID/run_id=$RUN_ID/task_id=$first/" >&2
        echo "  in the UI: $API/dags/$DAG_ID/runs/$RUN_ID/tasks/$first" >&2
    fi
    echo "  Airflow's own log: $LOG" >&2
    [[ "$state" != timeout ]] || echo "  still running after ${RUN_TIMEOUT_S}s: on a slow or busy machine, RUN_TIMEOUT_S=3600 make run" >&2
    if [[ "$EXIT_AFTER_RUN" == 1 ]]; then
        api PATCH "/dags/$DAG_ID" '{"is_paused": true}' >/dev/null || true
        exit 1
    fi
else
    say "run $RUN_ID succeeded in ${elapsed}s; row counts:"
    "$PY" -m sda.cli status 2>/dev/null | grep -v "^\s*$" || echo "(sda status unavailable)"
    say "the alerts against the simulator's truth (which the pipeline never reads; sda score):"
    "$PY" -m sda.cli score 2>/dev/null || echo "(sda score unavailable)"
fi

cat <<EOF

------------------------------------------------------------------------------------------------
 Airflow UI     $API          user: admin   password: $PASSWORD
                (the password is stored in $PASSWORD_FILE)
 DAG            $API/dags/$DAG_ID   (run: $RUN_ID, $state)
 run report     $API/sda-reports/runs/$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$RUN_ID")/index.html
                (counts per stage, data-quality checks, alert plots; log in to the UI first)
 metrics        $API/sda-metrics/metrics   (Prometheus's text format, per stage; a scrape sends
                Authorization: Bearer <token from POST $API/auth/token>; files: $(dirname "$LAKEHOUSE")/metrics)
 Delta tables   $LAKEHOUSE/{bronze,silver,gold,ops}/<table>
 quarantine     $LAKEHOUSE/ops/quarantine   (records refused, with the reason)
 alerts         $LAKEHOUSE/gold/alerts and the messages in $OUTBOX
 landing files  $LANDING   (simulated; the ground truth is in $LANDING/_truth)
 task logs      $AIRFLOW_HOME/logs      Airflow log: $LOG
 row counts     .venv/bin/sda status
------------------------------------------------------------------------------------------------
EOF

if [[ "$EXIT_AFTER_RUN" == 1 ]]; then
    api PATCH "/dags/$DAG_ID" '{"is_paused": true}' >/dev/null || true
    [[ "$state" == success ]] && exit 0 || exit 1
fi
# --- 6. the sensors keep reporting -------------------------------------------------------------
"$PY" -m sda.sim.feed run >>"$AIRFLOW_HOME/feed.log" 2>&1 &
FEED_PID=$!
say "the simulated sensors keep reporting (log: $AIRFLOW_HOME/feed.log): files land as each 5-minute chunk is
    delivered, and each landing starts a run (at the latest every ${SDA_CADENCE_MINUTES:-15} minutes).
    Ctrl-C stops the sensors, Airflow and Spark; the next \`make run\` resumes this sky"
wait "$AIRFLOW_PID"
