#!/bin/sh
# attune preremove.
#   deb: prerm remove | upgrade <new-version> | deconfigure | failed-upgrade
#   rpm: %preun $1 = 0 (erase) or >= 1 (upgrade)
# Stops the service before its files go away; never on upgrade (the postinstall
# of the new deb, or the %postun of the old rpm, restarts it instead).
# Must not fail: a failing prerm/%preun would make the package impossible to remove.

UNIT=attune.service

case "$1" in
remove | deconfigure) format=deb ;;
0) format=rpm ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
	if [ "$format" = rpm ]; then
		# Fedora convention (%systemd_preun): disable and stop on erase.
		systemctl --no-reload disable --now "$UNIT" >/dev/null 2>&1 || true
	else
		# Debian convention: stop; the enablement is kept until purge.
		systemctl stop "$UNIT" >/dev/null 2>&1 || true
	fi
fi
exit 0
