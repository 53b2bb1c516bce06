#!/usr/bin/env bash
# Installs and starts what the test suite needs beyond Python packages:
# Debian's chromium (dashboard tests) and a running PostgreSQL (contract tests) that the
# suite can reach as user postgres over TCP on loopback without a password.
set -euo pipefail

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing system packages: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

cluster_version() { ls /etc/postgresql | sort -V | tail -n 1; }

if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(cluster_version)" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi

# A fresh Debian cluster asks for a password on TCP (scram-sha-256). The suite's throwaway
# databases live on a loopback-only test server, so trust loopback connections there.
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
  hba="/etc/postgresql/$(cluster_version)/main/pg_hba.conf"
  echo "allowing password-less loopback connections in $hba"
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  pg_ctlcluster --skip-systemctl-redirect "$(cluster_version)" main reload
  sleep 1
  psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null
fi
