#!/usr/bin/env bash
# Starts (or reuses) a Postgres cluster that only accepts TLS connections
# with a password (scram-sha-256), its certificate signed by a throwaway CA,
# for the TLS tests of floe's Postgres source. Prints two lines on stdout:
#
#   <conninfo without sslmode or password>
#   <directory with ca.crt (the CA), other-ca.crt (a CA that signed nothing)>
#
#   FLOE_PG_TLS_PORT  port on 127.0.0.1 (default 15433; pg.sh takes another
#                     when that one is in use or in the ephemeral port range)
#
# The server's certificate names only `floe-db.test`, so tests connect with
# host=floe-db.test hostaddr=127.0.0.1 (verify-full passes) or host=localhost
# (verify-full fails on the name, verify-ca passes). The postgres role's
# password is `floe-tls-test`. Tests only: it listens on 127.0.0.1 alone.
set -euo pipefail

port="${FLOE_PG_TLS_PORT:-15433}"
root="${FLOE_PG_TLS_DIR:-$HOME/.cache/floe-pg-tls/$port}"
certs="$root/certs"
data="$root/data"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$certs"

if [ ! -f "$certs/server.crt" ]; then
  echo "pg-tls.sh: generating a test CA and server certificate" >&2
  (
    cd "$certs"
    for ca in ca other-ca; do
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 \
        -subj "/CN=floe test $ca" -keyout "$ca.key" -out "$ca.crt" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    done
    openssl req -newkey rsa:2048 -nodes -subj "/CN=floe-db.test" \
      -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' "subjectAltName=DNS:floe-db.test" "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -sha256 -extfile server.ext -out server.crt 2>/dev/null
    chmod 600 ./*.key
  )
fi

# TLS with a password over TCP, plain TCP refused; the socket (for the
# password set-up below) trusts local users.
hba="$root/pg_hba.conf"
printf '%s\n' \
  "local all all trust" \
  "hostssl all all 127.0.0.1/32 scram-sha-256" \
  "hostnossl all all 127.0.0.1/32 reject" > "$hba"

# The server reads its key as its own user, and refuses a key others can read.
cp "$certs/server.crt" "$certs/server.key" "$certs/ca.crt" "$root/"
if [ "$(id -u)" = 0 ]; then
  chown postgres "$root/server.key" "$root/server.crt" "$root/ca.crt"
  chmod o+x "$root"
fi
chmod 600 "$root/server.key"

conninfo="$(
  FLOE_PG_PORT="$port" FLOE_PG_DATA="$data" FLOE_PG_HBA="$hba" \
  FLOE_PG_OPTS="-c ssl=on -c ssl_cert_file=$root/server.crt -c ssl_key_file=$root/server.key -c ssl_ca_file=$root/ca.crt -c password_encryption=scram-sha-256" \
  "$here/pg.sh" | tail -n 1
)"

# pg.sh's conninfo points at TCP, on the port the cluster took; the socket
# lives in the data directory.
port="$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$conninfo")"
psql -h "$data" -p "$port" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
  -c "ALTER ROLE postgres PASSWORD 'floe-tls-test'" >&2

echo "$conninfo"
echo "$certs"
