#!/usr/bin/env bash
# A development CA and one certificate per named host, for mlfc's TLS (docs/tls.md), with Debian's openssl.
#
#   scripts/make-certs.sh OUT_DIR HOST...        e.g. scripts/make-certs.sh certs coord ctl sw1 host1
#
# OUT_DIR/ca.crt + ca.key: the CA, made once and reused (hosts added later share it; delete it to start over).
# OUT_DIR/HOST.crt + HOST.key: a certificate for HOST, usable by a server and as a client certificate (mTLS).
# Its subject alternative names: HOST, localhost, 127.0.0.1 and ::1 (tests and loopback deployments).
# Environment: DAYS (validity, default 825), CA_NAME (the CA's common name), VALID_FROM and VALID_UNTIL
# (YYYYMMDDHHMMSSZ: an explicit validity window, e.g. an already expired certificate for tests).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 OUT_DIR HOST..." >&2
  exit 2
fi
out=$1
shift
days=${DAYS:-825}
ca_name=${CA_NAME:-mlfc development CA}
mkdir -p "$out"
chmod 700 "$out"

if [ ! -s "$out/ca.crt" ] || [ ! -s "$out/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 3650 \
    -subj "/CN=$ca_name" -keyout "$out/ca.key" -out "$out/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  chmod 600 "$out/ca.key"
  echo "CA: $out/ca.crt"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# openssl ca (not x509 -req): it alone takes an explicit start and end date on openssl 3.0
touch "$work/index.txt"
cat >"$work/ca.cnf" <<CNF
[ca]
default_ca = dev
[dev]
database = $work/index.txt
new_certs_dir = $work
serial = $work/serial
default_md = sha256
policy = any
copy_extensions = none
unique_subject = no
[any]
commonName = supplied
CNF

for host in "$@"; do
  if ! [[ $host =~ ^[A-Za-z0-9][A-Za-z0-9.-]*$ ]]; then
    echo "$0: $host: a host name is letters, digits, '.' and '-'" >&2
    exit 2
  fi
  openssl rand -hex 16 >"$work/serial"
  san="DNS:$host,DNS:localhost,IP:127.0.0.1,IP:::1"
  [[ $host =~ ^[0-9.]+$ ]] && san="IP:$host,DNS:localhost,IP:127.0.0.1,IP:::1"
  cat >"$work/ext.cnf" <<EXT
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = $san
EXT
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$host" \
    -keyout "$out/$host.key" -out "$work/$host.csr" 2>/dev/null
  chmod 600 "$out/$host.key"
  if [ -n "${VALID_FROM:-}${VALID_UNTIL:-}" ]; then
    dates=(-startdate "${VALID_FROM:?VALID_UNTIL needs VALID_FROM}" -enddate "${VALID_UNTIL:?VALID_FROM needs VALID_UNTIL}")
  else
    dates=(-days "$days")
  fi
  openssl ca -batch -notext -config "$work/ca.cnf" -cert "$out/ca.crt" -keyfile "$out/ca.key" \
    -extfile "$work/ext.cnf" "${dates[@]}" -in "$work/$host.csr" -out "$out/$host.crt" 2>"$work/err" \
    || { cat "$work/err" >&2; exit 1; }
  echo "$host: $out/$host.crt $out/$host.key ($san)"
done
