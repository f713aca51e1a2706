#!/bin/sh
# attune postinstall.
#   deb: postinst configure [old-version] | abort-upgrade | abort-remove | abort-deconfigure
#   rpm: %post $1 = 1 (install) or >= 2 (upgrade)
# Creates the data directory; where systemd runs: enables the service on a fresh
# install. Debian convention: start it (on a fresh install) or restart it (after
# an upgrade) when it is enabled. Fedora/RHEL convention: do not start it on
# install; the old package's %postun restarts a running service after an upgrade.
set -e

UNIT=attune.service
ATTUNE_HOME=/var/lib/attune

format=deb
action=install
case "$1" in
configure)
	if [ -n "$2" ]; then action=upgrade; fi
	;;
abort-remove | abort-deconfigure) action=upgrade ;;
abort-upgrade) exit 0 ;;
1) format=rpm ;;
[0-9]*) format=rpm action=upgrade ;;
*) exit 0 ;;
esac

# systemd's StateDirectory= creates it too; this covers running without
# systemd (containers) and `sudo -u attune attune ...` before the first start.
if [ ! -d "$ATTUNE_HOME" ]; then
	install -d -o attune -g attune -m 0750 "$ATTUNE_HOME"
fi

if [ ! -d /run/systemd/system ]; then
	if [ "$action" = install ]; then
		echo "attune: systemd is not running; start the appliance with:"
		echo "  runuser -u attune -- /usr/bin/attune serve --config /etc/attune/attune.yaml"
	fi
	exit 0
fi

systemctl daemon-reload >/dev/null 2>&1 || true
if [ "$action" = install ]; then
	systemctl enable "$UNIT" >/dev/null 2>&1 || echo "attune: warning: could not enable $UNIT" >&2
fi

if [ "$format" = rpm ]; then
	if [ "$action" = install ]; then
		echo "attune: $UNIT is enabled; start it with: systemctl start attune"
	fi
	exit 0
fi

# deb: start/restart only when enabled (an administrator may have disabled it).
if systemctl --quiet is-enabled "$UNIT" 2>/dev/null; then
	if [ "$action" = install ]; then verb=start; else verb=restart; fi
	if ! systemctl "$verb" "$UNIT"; then
		echo "attune: warning: '$verb $UNIT' failed; see: journalctl -u attune" >&2
	fi
fi
exit 0
