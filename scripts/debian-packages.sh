#!/usr/bin/env bash
# The Debian packages mlfc uses when it runs as root (`make install` and .ci/run call this).
#
# Installs only what dpkg-query says is missing, once and quietly (apt-get update only then), and
# prints what it installed. Without root, or with MLFC_NO_APT=1, it prints the one apt-get line for
# what is missing and exits 0: the Python install goes on and the tests that need a package skip
# with a reason. ns-3 is not here: `make install-sim` (PyPI, minutes).
set -uo pipefail

PACKAGES=(
  make python3-venv python3-dev      # the venv from Debian's python3 (`make install`)
  mininet ethtool iputils-ping       # `make run`, lab/ and the mininet tests (lab/run.py's checks)
  iproute2 tcpdump iperf3            # namespaces, htb bottlenecks, captures; bench/transport_bench.py
  clang llvm libbpf-dev bpftool      # eBPF MLTCP (hosts/kernel): `make bpf`, tests/kernel
  util-linux                         # nsenter, flock (measurement lock)
  openssl                            # `make certs` (scripts/make-certs.sh) and the TLS tests
)

if ! command -v dpkg-query >/dev/null; then
  echo "debian-packages: not a Debian system; install the equivalents of: ${PACKAGES[*]}"
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)
  [ "$status" = installed ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ] || [ -n "${MLFC_NO_APT:-}" ] || ! command -v apt-get >/dev/null; then
  echo "debian-packages: missing ${missing[*]}; as root: $line"
  exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
echo "debian-packages: installing ${missing[*]}"
if apt-get update -qq >"$log" 2>&1 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  echo "debian-packages: installed ${missing[*]}"
else
  tail -n 20 "$log" >&2
  echo "debian-packages: apt-get failed (above); the tests that need these skip. By hand: $line" >&2
fi
exit 0
