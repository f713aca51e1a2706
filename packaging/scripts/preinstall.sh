#!/bin/sh
# attune preinstall.
#   deb: preinst install|upgrade|abort-upgrade [old-version]
#   rpm: %pre $1 = 1 (install) or >= 2 (upgrade)
# Creates the attune system group and user before the files are unpacked, so
# /etc/attune/attune.yaml (root:attune, 0640) gets its group on both formats.
set -e

ATTUNE_USER=attune
ATTUNE_GROUP=attune
ATTUNE_HOME=/var/lib/attune

nologin=/bin/false
for s in /usr/sbin/nologin /sbin/nologin; do
	if [ -x "$s" ]; then
		nologin=$s
		break
	fi
done

if ! getent group "$ATTUNE_GROUP" >/dev/null 2>&1; then
	groupadd --system "$ATTUNE_GROUP"
fi
if ! getent passwd "$ATTUNE_USER" >/dev/null 2>&1; then
	useradd --system --gid "$ATTUNE_GROUP" --home-dir "$ATTUNE_HOME" --no-create-home \
		--shell "$nologin" --comment "Attune appliance" "$ATTUNE_USER"
fi
exit 0
