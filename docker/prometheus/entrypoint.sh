#!/bin/sh
# Prometheus (Debian's package) for the compose deployment: its configuration written from the environment (where
# the targets are: compose service names by default, 127.0.0.1 ports under tests/compose/loopback.yaml), then
# Prometheus itself. Its series are kept on the prometheus-data volume for SDA_PROMETHEUS_RETENTION (15 days).
set -eu
: "${SDA_PROMETHEUS_LISTEN:=0.0.0.0:9090}"
: "${SDA_PROMETHEUS_RETENTION:=15d}"
: "${SDA_SCRAPE_INTERVAL:=15s}"
: "${SDA_SCRAPE_BRIDGE:=metrics-bridge:9464}"
: "${SDA_SCRAPE_SPARK_MASTER:=spark-master:8081}"
: "${SDA_SCRAPE_SPARK_DRIVER:=spark-connect:4040}"
conf=/prometheus/prometheus.yml
sed -e "s|@INTERVAL@|${SDA_SCRAPE_INTERVAL}|g" -e "s|@BRIDGE@|${SDA_SCRAPE_BRIDGE}|g" \
    -e "s|@SPARK_MASTER@|${SDA_SCRAPE_SPARK_MASTER}|g" -e "s|@SPARK_DRIVER@|${SDA_SCRAPE_SPARK_DRIVER}|g" \
    /etc/sda-prometheus/prometheus.yml.in > "$conf"
exec prometheus --config.file="$conf" --storage.tsdb.path=/prometheus/data \
    --storage.tsdb.retention.time="${SDA_PROMETHEUS_RETENTION}" --web.listen-address="${SDA_PROMETHEUS_LISTEN}"
