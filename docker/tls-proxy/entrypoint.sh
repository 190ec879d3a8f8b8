#!/bin/sh
# nginx (Debian's, with its stream module) as the TLS proxy of docker/tls-proxy/nginx.conf.in: the listening address
# and the upstream from the environment, then nginx in the foreground.
set -eu
: "${SDA_TLS_LISTEN:=15002}"
: "${SDA_TLS_UPSTREAM:=127.0.0.1:15003}"
for f in /opt/sda/certs/server.crt /opt/sda/certs/server.key; do
    [ -r "$f" ] || { echo "tls-proxy: $f is missing or unreadable (certs-init makes it)" >&2; exit 1; }
done
sed -e "s|@LISTEN@|${SDA_TLS_LISTEN}|g" -e "s|@UPSTREAM@|${SDA_TLS_UPSTREAM}|g" \
    /etc/sda-tls-proxy/nginx.conf.in > /tmp/nginx.conf
exec nginx -e stderr -c /tmp/nginx.conf -g "daemon off;"
