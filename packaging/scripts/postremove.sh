#!/bin/sh
# attune postremove.
#   deb: postrm remove | purge | upgrade | failed-upgrade | abort-install | abort-upgrade | disappear
#   rpm: %postun $1 = 0 (erase) or >= 1 (upgrade)
# deb purge: removes /var/lib/attune (the embedded database, broker data and
#   admin token), the service's enablement, the attune user and group.
# rpm: never deletes data or the user (Fedora guidelines; rpm has no purge);
#   after an upgrade, restarts the service if it was running.
# Nothing is ever deleted on upgrade.

UNIT=attune.service
ATTUNE_USER=attune
ATTUNE_GROUP=attune
ATTUNE_HOME=/var/lib/attune

systemd_reload() {
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
}

case "$1" in
remove)
	systemd_reload
	;;
purge)
	rm -f /etc/systemd/system/multi-user.target.wants/"$UNIT"
	systemd_reload
	rm -rf "$ATTUNE_HOME"
	if getent passwd "$ATTUNE_USER" >/dev/null 2>&1; then
		userdel "$ATTUNE_USER" >/dev/null 2>&1 ||
			echo "attune: warning: could not remove user $ATTUNE_USER (still running processes?)" >&2
	fi
	if getent group "$ATTUNE_GROUP" >/dev/null 2>&1; then
		groupdel "$ATTUNE_GROUP" >/dev/null 2>&1 ||
			echo "attune: warning: could not remove group $ATTUNE_GROUP" >&2
	fi
	rmdir /etc/attune 2>/dev/null || true
	;;
0)
	systemd_reload
	;;
[0-9]*)
	systemd_reload
	if [ -d /run/systemd/system ]; then
		systemctl try-restart "$UNIT" >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
