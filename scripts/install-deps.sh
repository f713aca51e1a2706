#!/usr/bin/env bash
# Installs the system packages the appliance and its tests need, if missing:
# PostgreSQL server binaries (embedded database), RabbitMQ (private broker),
# Chromium (browser tests). Idempotent; uses sudo when not root.
set -euo pipefail

want_chromium=${WITH_CHROMIUM:-1}

have_postgres() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || compgen -G "/usr/pgsql-*/bin/initdb" >/dev/null
}
have_rabbitmq() { [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1; }
have_chromium() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }

missing=()
have_postgres || missing+=(postgresql)
have_rabbitmq || missing+=(rabbitmq-server)
if [ "$want_chromium" = 1 ] && ! have_chromium; then missing+=(chromium); fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}" >&2
if command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  pkgs=()
  for p in "${missing[@]}"; do
    case "$p" in
      postgresql) pkgs+=(postgresql-server) ;;
      *) pkgs+=("$p") ;;
    esac
  done
  $SUDO dnf install -y "${pkgs[@]}"
else
  echo "install-deps: no apt-get or dnf here. Install these yourself: ${missing[*]}" >&2
  echo "  (or run attune with --database-url and --amqp-url pointing at external services)" >&2
  exit 1
fi
# Debian starts the packaged services on install; the appliance runs private
# instances instead, so stop the system-wide ones to free ports and memory.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now rabbitmq-server >/dev/null 2>&1 || true
fi
have_postgres || { echo "install-deps: PostgreSQL server binaries still missing" >&2; exit 1; }
have_rabbitmq || { echo "install-deps: rabbitmq-server still missing" >&2; exit 1; }
