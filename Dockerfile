# The sda-fusion image: Python 3.11, Java 17, requirements.lock, Delta's jars and the project, run as a
# non-root user. Every Airflow and Spark service of docker-compose.yaml is built from it (`build:`);
# the `postgres` stage is a PostgreSQL server from Debian's packages for where Docker Hub's
# `postgres` image cannot be pulled; the `prometheus` stage is Debian's Prometheus with the deployment's
# configuration and alerting rules; the `tls-proxy` stage is Debian's nginx terminating TLS for Spark Connect.
#
#   docker build -t sda-fusion .                                      on python:3.11-slim-bookworm
#   docker build --build-arg BASE_IMAGE=sda-fusion-base:bookworm .    on a base made from Debian's
#                                                                     packages (docker/build-base.sh)
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- PostgreSQL (Debian's), with the official image's variables: POSTGRES_USER/PASSWORD/DB --------
FROM ${BASE_IMAGE} AS postgres
ENV DEBIAN_FRONTEND=noninteractive
# postgres as uid 999, as in the official image: the deployment's certs-init gives it its TLS key (postgres.key)
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /run/postgresql
COPY docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]

# --- Prometheus (Debian's), scraping the pipeline, Airflow and Spark: docker/prometheus/ ---------
FROM ${BASE_IMAGE} AS prometheus
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus curl \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus \
    && chown prometheus:prometheus /prometheus
COPY docker/prometheus/ /etc/sda-prometheus/
USER prometheus
ENTRYPOINT ["/etc/sda-prometheus/entrypoint.sh"]

# --- the TLS proxy in front of Spark Connect (Debian's nginx and its stream module): docker/tls-proxy/ --
FROM ${BASE_IMAGE} AS tls-proxy
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx libnginx-mod-stream \
    && rm -rf /var/lib/apt/lists/*
COPY docker/tls-proxy/ /etc/sda-tls-proxy/
ENTRYPOINT ["/etc/sda-tls-proxy/entrypoint.sh"]

# --- the project -----------------------------------------------------------------------------
# (Few instructions after the large layers: on a `vfs` storage driver every step copies the whole tree.)
FROM ${BASE_IMAGE} AS sda
ENV DEBIAN_FRONTEND=noninteractive PATH=/opt/venv/bin:$PATH VIRTUAL_ENV=/opt/venv PYTHONUNBUFFERED=1 \
    SDA_HOME=/opt/sda SDA_JARS_DIR=/opt/sda/jars PYTHONPATH=/opt/sda/include \
    PYSPARK_PYTHON=/opt/venv/bin/python
WORKDIR /opt/sda
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["sda", "--help"]
# Java 17 for Spark (the Connect server, the standalone master and workers); tini as PID 1; curl and
# procps for health checks and Spark's scripts. Everything after this runs as the user sda (50000).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini curl procps \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 50000 --gid 0 --home-dir /home/sda --create-home --shell /bin/bash sda \
    && python3 -m venv /opt/venv \
    && mkdir -p /opt/sda/var/lakehouse /opt/sda/var/landing /opt/sda/var/outbox /opt/sda/var/catalog /opt/sda/var/airflow \
    && chown -R 50000:0 /opt/venv /opt/sda \
    && chmod -R g+w /opt/sda
USER 50000
# requirements.lock (every package pinned with its hashes: `make lock`), installed by uv as `make setup` does;
# UV_SYSTEM_CERTS: uv trusts the image's certificate store (which a base from docker/build-base.sh gives the
# build machine's own CAs), not only its bundled roots; --compile-bytecode: the image holds the bytecode, or
# every container would compile its own on its first imports (pip compiles by default, uv does not)
COPY --chown=50000:0 requirements.lock /opt/sda/requirements.lock
RUN pip install --no-cache-dir --disable-pip-version-check uv==0.13.8 \
    && UV_SYSTEM_CERTS=1 uv pip sync --no-cache --quiet --compile-bytecode --python /opt/venv/bin/python \
        /opt/sda/requirements.lock
COPY --chown=50000:0 . /opt/sda
# The project itself (the `sda` command); Delta's jars from Maven Central into /opt/sda/jars, once,
# so no container fetches anything at run time.
RUN UV_SYSTEM_CERTS=1 uv pip install --no-cache --quiet --python /opt/venv/bin/python --no-deps -e /opt/sda \
    && python -m sda.lake.spark \
    && rm -rf /opt/sda/ivy /home/sda/.ivy2*
