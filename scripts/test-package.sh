#!/usr/bin/env bash
# Tests the attune packages (`make test-package`):
#  1. builds the .deb, .rpm and tarball (scripts/package.sh);
#  2. inspects them: fields, dependencies, files, modes, owners, conffile /
#     %config(noreplace) marking, maintainer scripts, the stamped version, the
#     packaged config file (every key = its default), the systemd unit
#     (systemd-analyze verify);
#  3. runs the maintainer scripts' systemd decisions against a stub systemctl
#     in a private mount namespace (root; deb and rpm argument conventions);
#  4. as root on Debian: installs the .deb with apt-get, checks user, group,
#     dirs and modes, starts `attune serve --config /etc/attune/attune.yaml` as
#     the attune user the way the unit does (CI has no systemd), waits for
#     /readyz, checks the admin token, stops it with SIGTERM, upgrades to a
#     newer version (data, user and a local config change survive), starts it
#     again, purges (files, user and data gone); then installs, upgrades and
#     erases the .rpm with rpm itself (scriptlets with rpm's $1);
#  Everything it installs or starts is removed on exit, so a rerun starts fresh.
#
# Environment: SKIP_BUILD=1 (test the packages named in dist/attune-package.env),
# SKIP_INSTALL=1 (inspection only), SKIP_RPM_INSTALL=1, READY_TIMEOUT (s, 90),
# STOP_TIMEOUT (s, 90), KEEP_LOGS=dir (copy the server logs there).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
READY_TIMEOUT=${READY_TIMEOUT:-90}
STOP_TIMEOUT=${STOP_TIMEOUT:-90}

FAILS=0
fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}
ok() { echo "  ok: $*"; }
die() {
	echo "FATAL: $*" >&2
	FAILS=$((FAILS + 1))
	exit 1
}
step() { echo; echo "=== $*"; }
# expect DESC ACTUAL WANTED
expect() {
	if [[ "$2" == "$3" ]]; then ok "$1: $2"; else fail "$1: got '$2', want '$3'"; fi
}
# expect_has DESC HAYSTACK NEEDLE  (whole comma/space/newline separated item)
expect_has() {
	if tr ', ' '\n\n' <<<"$2" | grep -qxF -- "$3"; then ok "$1 has $3"; else fail "$1 lacks '$3' (have: $(tr '\n' ' ' <<<"$2"))"; fi
}
expect_lacks() {
	if tr ', ' '\n\n' <<<"$2" | grep -qxF -- "$3"; then fail "$1 must not have '$3' (have: $(tr '\n' ' ' <<<"$2"))"; else ok "$1 has no $3"; fi
}

TMP=$(mktemp -d /tmp/attune-test-package.XXXXXX)
chmod 0755 "$TMP" # the attune user runs the extracted binary from here
SERVER_PID=""
INSTALL_STARTED=""
RPMDB=""

cleanup() {
	local rc=$?
	set +e
	if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		echo "cleanup: stopping attune (pid $SERVER_PID)"
		kill -TERM "$SERVER_PID"
		for _ in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 1; done
		kill -KILL "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	if [[ -n $INSTALL_STARTED ]]; then
		kill_attune_leftovers cleanup
		if [[ -n $RPMDB ]] && rpm --dbpath "$RPMDB" -q attune >/dev/null 2>&1; then
			echo "cleanup: rpm -e attune"
			rpm --dbpath "$RPMDB" -e --nodeps attune >/dev/null 2>&1 ||
				rpm --dbpath "$RPMDB" -e --nodeps --noscripts attune >/dev/null 2>&1
		fi
		if dpkg-query -W -f='${Status}' attune 2>/dev/null | grep -qv 'not-installed'; then
			echo "cleanup: apt-get purge attune"
			DEBIAN_FRONTEND=noninteractive apt-get purge -y -q attune >/dev/null 2>&1 || dpkg --purge --force-all attune >/dev/null 2>&1
		fi
		remove_leftovers cleanup
	fi
	rm -rf "$TMP"
	echo
	if [[ $FAILS -gt 0 ]]; then
		echo "test-package: FAILED ($FAILS failure(s))"
		exit 1
	fi
	if [[ $rc -ne 0 ]]; then
		echo "test-package: FAILED (exit $rc)"
		exit "$rc"
	fi
	echo "test-package: PASSED"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Live (not zombie) processes owned by the attune user; after a stop they are
# leaks (postgres, beam.smp, epmd ...). Zombies are not: children that outlived
# their parent by a moment wait for PID 1 to reap them.
attune_pids() {
	getent passwd attune >/dev/null 2>&1 || return 0
	ps -u attune -o pid=,stat= 2>/dev/null | awk '$2 !~ /^Z/ {print $1}'
}
kill_attune_leftovers() {
	local pids
	pids=$(attune_pids)
	[[ -z $pids ]] && return 0
	echo "$1: killing leftover processes of user attune:"
	ps -o pid,user,args -p "$(tr '\n' ',' <<<"$pids" | sed 's/,$//')"
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	sleep 2
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null
	return 0
}
remove_leftovers() {
	[[ -e /var/lib/attune || -e /etc/attune ]] && echo "$1: removing /var/lib/attune /etc/attune"
	rm -rf /var/lib/attune /etc/attune /usr/bin/attune /usr/lib/systemd/system/attune.service /usr/share/doc/attune
	if getent passwd attune >/dev/null 2>&1; then
		echo "$1: removing user attune"
		userdel attune >/dev/null 2>&1
	fi
	if getent group attune >/dev/null 2>&1; then
		groupdel attune >/dev/null 2>&1
	fi
	return 0
}

# ---------------------------------------------------------------- build
step "build packages"
if [[ -z ${SKIP_BUILD:-} ]]; then
	scripts/package.sh || die "scripts/package.sh failed"
fi
[[ -f dist/attune-package.env ]] || die "dist/attune-package.env missing (run scripts/package.sh)"
# shellcheck disable=SC1091
source dist/attune-package.env
for f in "$DEB" "$RPM" "$TARBALL"; do [[ -f $f ]] || die "missing $f"; done
echo "version=$VERSION commit=$COMMIT date=$DATE pkg_version=$PKG_VERSION"
if command -v dpkg >/dev/null; then
	dpkg --compare-versions "$PKG_VERSION" gt 0 2>/dev/null && ok "dpkg accepts version $PKG_VERSION" ||
		fail "dpkg does not accept version $PKG_VERSION"
fi
ARCH_DEB=$(dpkg-deb -f "$DEB" Architecture 2>/dev/null)

# ---------------------------------------------------------------- deb
step "inspect $DEB"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
dpkg-deb -I "$DEB" || fail "dpkg-deb -I failed"
expect "deb Package" "$(dpkg-deb -f "$DEB" Package)" attune
expect "deb Version" "$(dpkg-deb -f "$DEB" Version)" "$PKG_VERSION"
expect "deb Section" "$(dpkg-deb -f "$DEB" Section)" admin
[[ -n $(dpkg-deb -f "$DEB" Maintainer) ]] && ok "deb Maintainer set" || fail "deb Maintainer empty"
expect "deb Pre-Depends" "$(dpkg-deb -f "$DEB" Pre-Depends)" passwd
DEB_DEPENDS=$(dpkg-deb -f "$DEB" Depends)
DEB_RECOMMENDS=$(dpkg-deb -f "$DEB" Recommends)
expect_has "deb Recommends" "$DEB_RECOMMENDS" postgresql
expect_has "deb Recommends" "$DEB_RECOMMENDS" rabbitmq-server
expect_lacks "deb Depends" "$DEB_DEPENDS" postgresql
expect_lacks "deb Depends" "$DEB_DEPENDS" rabbitmq-server

dpkg-deb -c "$DEB"
# "mode owner/group path" of every entry, directories included.
DEB_FILES=$(dpkg-deb -c "$DEB" | awk '{print $1, $2, $6}' | sed 's| \./| /|; s|/$||')
deb_entry() { # PATH -> "mode owner/group"
	awk -v p="$1" '$3 == p {print $1, $2}' <<<"$DEB_FILES"
}
expect "deb /usr/bin/attune" "$(deb_entry /usr/bin/attune)" "-rwxr-xr-x root/root"
expect "deb unit" "$(deb_entry /usr/lib/systemd/system/attune.service)" "-rw-r--r-- root/root"
expect "deb /etc/attune" "$(deb_entry /etc/attune)" "drwxr-xr-x root/root"
expect "deb config" "$(deb_entry /etc/attune/attune.yaml)" "-rw-r----- root/attune"
expect "deb doc" "$(deb_entry /usr/share/doc/attune/INSTALL.md)" "-rw-r--r-- root/root"
expect "deb regular files" "$(awk '$1 !~ /^d/ {print $3}' <<<"$DEB_FILES" | sort | tr '\n' ' ')" \
	"/etc/attune/attune.yaml /usr/bin/attune /usr/lib/systemd/system/attune.service /usr/share/doc/attune/INSTALL.md "
if awk '$1 ~ /^d/ {print $3}' <<<"$DEB_FILES" | grep -qx /var/lib/attune; then
	fail "deb must not ship /var/lib/attune (created by postinst / StateDirectory)"
fi

mkdir -p "$TMP/deb/control" "$TMP/deb/root"
dpkg-deb -e "$DEB" "$TMP/deb/control" || fail "dpkg-deb -e failed"
dpkg-deb -x "$DEB" "$TMP/deb/root" || fail "dpkg-deb -x failed"
expect "deb conffiles" "$(cat "$TMP/deb/control/conffiles" 2>/dev/null)" /etc/attune/attune.yaml
for pair in preinst:preinstall prerm:preremove postinst:postinstall postrm:postremove; do
	s=${pair%%:*} src=packaging/scripts/${pair#*:}.sh
	f=$TMP/deb/control/$s
	if [[ ! -f $f ]]; then
		fail "deb has no $s"
		continue
	fi
	[[ -x $f ]] && ok "deb $s is executable" || fail "deb $s is not executable"
	cmp -s "$f" "$src" && ok "deb $s is $src" || fail "deb $s differs from $src"
	sh -n "$f" && ok "deb $s parses (sh -n)" || fail "deb $s: syntax error"
done
cmp -s "$TMP/deb/root/etc/attune/attune.yaml" packaging/attune.yaml && ok "deb ships packaging/attune.yaml" ||
	fail "deb /etc/attune/attune.yaml differs from packaging/attune.yaml"
cmp -s "$TMP/deb/root/usr/lib/systemd/system/attune.service" packaging/attune.service && ok "deb ships packaging/attune.service" ||
	fail "deb unit differs from packaging/attune.service"

# The binary in the package: stamped, static.
BIN=$TMP/deb/root/usr/bin/attune
VOUT=$("$BIN" version 2>&1)
echo "  attune version: $VOUT"
for w in "$VERSION" "$COMMIT" "$DATE"; do
	[[ $VOUT == *"$w"* ]] && ok "attune version shows $w" || fail "attune version does not show '$w': $VOUT"
done
if command -v readelf >/dev/null; then
	if readelf -l "$BIN" 2>/dev/null | grep -q 'Requesting program interpreter'; then
		fail "/usr/bin/attune is dynamically linked (packages declare no library dependencies)"
	else
		ok "/usr/bin/attune is statically linked"
	fi
fi

# ---------------------------------------------------------------- config file
step "packaged config file (/etc/attune/attune.yaml)"
# Uncomment every commented key: "#key:" (top level) and "#  ..." (nested).
sed -E 's/^#([a-z_]+:)/\1/; s/^#(  +)/\1/' packaging/attune.yaml >"$TMP/attune-all-keys.yaml"
if "$BIN" config --help >/dev/null 2>&1; then
	CFG_PKG=$(env -i PATH=/usr/bin:/bin HOME=/nonexistent "$BIN" config --config packaging/attune.yaml 2>&1)
	rc1=$?
	CFG_ALL=$(env -i PATH=/usr/bin:/bin HOME=/nonexistent "$BIN" config --config "$TMP/attune-all-keys.yaml" 2>&1)
	rc2=$?
	CFG_DEF=$(env -i PATH=/usr/bin:/bin HOME=/nonexistent "$BIN" config --data-dir /var/lib/attune 2>&1)
	rc3=$?
	if [[ $rc1 -ne 0 || $rc2 -ne 0 || $rc3 -ne 0 ]]; then
		fail "attune config rejects the packaged file: $CFG_PKG / all keys uncommented: $CFG_ALL / defaults: $CFG_DEF"
	else
		ok "attune config accepts the packaged file, with every key uncommented too"
		[[ $CFG_PKG == "$CFG_DEF" ]] && ok "packaged file = built-in defaults + data_dir /var/lib/attune" ||
			fail "packaged file is not just the defaults plus data_dir: $(diff <(echo "$CFG_DEF") <(echo "$CFG_PKG"))"
		[[ $CFG_ALL == "$CFG_DEF" ]] && ok "every commented value is the built-in default" ||
			fail "commented values differ from the defaults:"$'\n'"$(diff <(echo "$CFG_DEF") <(echo "$CFG_ALL"))"
		# Every key `attune config` prints appears in the file.
		missing=""
		while read -r key; do
			grep -qE "^#? *${key}:" packaging/attune.yaml || missing+=" $key"
		done < <(grep -oE '^ *[a-z_]+:' <<<"$CFG_DEF" | tr -d ' :' | sort -u)
		[[ -z $missing ]] && ok "every config key is listed in the file" || fail "keys missing from packaging/attune.yaml:$missing"
	fi
else
	fail "attune config is not available in the packaged binary; cannot check the config file"
fi

# ---------------------------------------------------------------- unit
step "systemd unit"
unit=packaging/attune.service
for want in "User=attune" "Group=attune" "StateDirectory=attune" "NoNewPrivileges=yes" "ProtectSystem=strict" \
	"ProtectHome=yes" "PrivateTmp=yes" "Restart=on-failure" "KillMode=mixed" "Environment=HOME=/var/lib/attune" \
	"ExecStart=/usr/bin/attune serve --config /etc/attune/attune.yaml" "WantedBy=multi-user.target"; do
	grep -qxF "$want" "$unit" && ok "unit: $want" || fail "unit lacks '$want'"
done
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}$/\1/p' "$unit")
# Graceful stop: worker.shutdown_timeout_seconds (30) + 30 s for the services.
[[ -n $stop && $stop -gt 60 ]] && ok "TimeoutStopSec=${stop}s > 60 s graceful shutdown" || fail "TimeoutStopSec ('$stop') must exceed 60 s"
if command -v systemd-analyze >/dev/null; then
	# verify needs ExecStart's binary to exist: point it at the extracted one.
	mkdir -p "$TMP/unit"
	sed "s|^ExecStart=/usr/bin/attune |ExecStart=$BIN |" "$unit" >"$TMP/unit/attune.service"
	out=$(systemd-analyze verify "$TMP/unit/attune.service" 2>&1)
	rc=$?
	if [[ $rc -eq 0 && -z $out ]]; then ok "systemd-analyze verify: clean"; else fail "systemd-analyze verify (rc $rc): $out"; fi
	systemd-analyze security --offline=yes "$TMP/unit/attune.service" 2>/dev/null | tail -1
else
	echo "  (systemd-analyze not installed: unit not verified)"
fi

# ---------------------------------------------------------------- rpm
step "inspect $RPM"
if ! command -v rpm >/dev/null; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q rpm >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q rpm >/dev/null; }
	fi
fi
if ! command -v rpm >/dev/null; then
	fail "rpm not installed (apt-get install rpm); .rpm not inspected"
else
	rpm -qpi "$RPM" 2>/dev/null
	case $ARCH_DEB in amd64) rpm_arch=x86_64 ;; arm64) rpm_arch=aarch64 ;; *) rpm_arch=$ARCH_DEB ;; esac
	expect "rpm name version release arch" "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH}' "$RPM" 2>/dev/null)" \
		"attune $PKG_VERSION 1 $rpm_arch"
	RPM_REQ=$(rpm -qpR "$RPM" 2>/dev/null | awk '{print $1}')
	RPM_REC=$(rpm -qp --recommends "$RPM" 2>/dev/null | awk '{print $1}')
	echo "  Requires: $(tr '\n' ' ' <<<"$RPM_REQ")  Recommends: $(tr '\n' ' ' <<<"$RPM_REC")"
	expect_has "rpm Requires" "$RPM_REQ" shadow-utils
	expect_lacks "rpm Requires" "$RPM_REQ" postgresql-server
	expect_lacks "rpm Requires" "$RPM_REQ" rabbitmq-server
	expect_has "rpm Recommends" "$RPM_REC" postgresql-server
	expect_has "rpm Recommends" "$RPM_REC" rabbitmq-server
	RPM_FILES=$(rpm -qp --qf '[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME}/%{FILEGROUPNAME} %{FILEFLAGS:fflags}\n]' "$RPM" 2>/dev/null)
	echo "$RPM_FILES" | sed 's/^/  /'
	rpm_entry() { awk -v p="$1" '$1 == p {print $2, $3, $4}' <<<"$RPM_FILES"; }
	expect "rpm /usr/bin/attune" "$(rpm_entry /usr/bin/attune)" "-rwxr-xr-x root/root "
	expect "rpm unit" "$(rpm_entry /usr/lib/systemd/system/attune.service)" "-rw-r--r-- root/root "
	expect "rpm config (mode, owner, %config(noreplace))" "$(rpm_entry /etc/attune/attune.yaml)" "-rw-r----- root/attune cn"
	expect "rpm %config files" "$(rpm -qpc "$RPM" 2>/dev/null)" /etc/attune/attune.yaml
	expect "rpm file list" "$(rpm -qpl "$RPM" 2>/dev/null | tr '\n' ' ')" \
		"/etc/attune /etc/attune/attune.yaml /usr/bin/attune /usr/lib/systemd/system/attune.service /usr/share/doc/attune/INSTALL.md "
	rpm -qp --scripts "$RPM" 2>/dev/null | grep -E 'scriptlet' | sed 's/^/  /'
	for pair in PREIN:preinstall POSTIN:postinstall PREUN:preremove POSTUN:postremove; do
		tag=${pair%%:*} src=packaging/scripts/${pair#*:}.sh
		rpm -qp --qf "%{$tag}" "$RPM" 2>/dev/null >"$TMP/rpm-$tag"
		# rpm drops the trailing newline
		if diff -q <(cat "$TMP/rpm-$tag"; echo) "$src" >/dev/null || cmp -s "$TMP/rpm-$tag" "$src"; then
			ok "rpm %$tag is $src"
		else
			fail "rpm %$tag differs from $src"
		fi
		expect "rpm %$tag interpreter" "$(rpm -qp --qf "%{${tag}PROG}" "$RPM" 2>/dev/null)" /bin/sh
	done
fi

# ---------------------------------------------------------------- tarball
step "inspect $TARBALL"
TAR_LIST=$(tar -tzvf "$TARBALL" | awk '{print $1, $2, $6}')
echo "$TAR_LIST" | sed 's/^/  /'
top=$(basename "$TARBALL" .tar.gz)
for f in attune:-rwxr-xr-x attune.yaml:-rw-r--r-- attune.service:-rw-r--r-- INSTALL.md:-rw-r--r--; do
	expect "tarball $top/${f%%:*}" "$(awk -v p="$top/${f%%:*}" '$3 == p {print $1, $2}' <<<"$TAR_LIST")" "${f#*:} 0/0"
done

# ---------------------------------------------------------------- maintainer script logic
step "maintainer scripts: systemd decisions (stub systemctl, private mount namespace)"
if [[ $(id -u) -ne 0 ]] || ! unshare --mount true 2>/dev/null; then
	echo "  (needs root and unshare --mount: skipped)"
else
	stub=$TMP/stub
	mkdir -p "$stub"
	for cmd in systemctl install useradd groupadd userdel groupdel; do
		printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$cmd" "$stub" >"$stub/$cmd"
		chmod +x "$stub/$cmd"
	done
	# run_script SCRIPT ARGS... -> the stubbed commands it ran, ";"-joined.
	# /run is a private tmpfs with run/systemd/system (= "systemd is running"),
	# /var/lib a private tmpfs (so /var/lib/attune is missing).
	run_script() {
		local script=$1
		shift
		: >"$stub/calls"
		unshare --mount sh -c '
			mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system &&
			mount -t tmpfs tmpfs /var/lib &&
			PATH="$0:$PATH" exec sh "$@" >/dev/null 2>&1' "$stub" "packaging/scripts/$script.sh" "$@"
		local rc=$?
		[[ $rc -eq 0 ]] || echo "exit $rc"
		sed 's/ >.*//' "$stub/calls" | paste -sd ';' -
	}
	I="install -d -o attune -g attune -m 0750 /var/lib/attune"
	R="systemctl daemon-reload"
	# deb
	expect "deb postinst configure (fresh install)" "$(run_script postinstall configure '')" \
		"$I;$R;systemctl enable attune.service;systemctl --quiet is-enabled attune.service;systemctl start attune.service"
	expect "deb postinst configure 0.9 (upgrade)" "$(run_script postinstall configure 0.9)" \
		"$I;$R;systemctl --quiet is-enabled attune.service;systemctl restart attune.service"
	expect "deb prerm remove" "$(run_script preremove remove)" "systemctl stop attune.service"
	expect "deb prerm upgrade" "$(run_script preremove upgrade 1.1)" ""
	expect "deb postrm remove" "$(run_script postremove remove)" "$R"
	expect "deb postrm upgrade" "$(run_script postremove upgrade 1.1)" ""
	expect "deb preinst install" "$(run_script preinstall install)" \
		"$(getent group attune >/dev/null || echo "groupadd --system attune;")$(getent passwd attune >/dev/null || echo "useradd --system --gid attune --home-dir /var/lib/attune --no-create-home --shell /usr/sbin/nologin --comment Attune appliance attune")"
	# rpm
	expect "rpm %post 1 (install: enable, no start)" "$(run_script postinstall 1)" "$I;$R;systemctl enable attune.service"
	expect "rpm %post 2 (upgrade)" "$(run_script postinstall 2)" "$I;$R"
	expect "rpm %preun 0 (erase)" "$(run_script preremove 0)" "systemctl --no-reload disable --now attune.service"
	expect "rpm %preun 1 (upgrade)" "$(run_script preremove 1)" ""
	expect "rpm %postun 0 (erase: keeps data and user)" "$(run_script postremove 0)" "$R"
	expect "rpm %postun 1 (upgrade: restart if running)" "$(run_script postremove 1)" "$R;systemctl try-restart attune.service"
fi

# ---------------------------------------------------------------- install
if [[ -n ${SKIP_INSTALL:-} ]]; then
	echo; echo "SKIP_INSTALL set: install test skipped"
	exit 0
fi
if [[ $(id -u) -ne 0 || ! -f /etc/debian_version ]] || ! command -v apt-get >/dev/null; then
	echo; echo "install test skipped: needs root on Debian/Ubuntu"
	exit 0
fi
[[ $ARCH_DEB == "$(dpkg --print-architecture)" ]] || die "cannot install a $ARCH_DEB package on $(dpkg --print-architecture)"
[[ -d /run/systemd/system ]] && echo "  note: systemd is running; the package will start attune.service itself"

step "install $DEB"
INSTALL_STARTED=1
if dpkg-query -W -f='${Status}' attune 2>/dev/null | grep -qv not-installed; then
	echo "attune is already installed (a previous run?): purging it first"
	run_apt purge attune || die "cannot purge the installed attune"
fi
kill_attune_leftovers pre-clean
remove_leftovers pre-clean

# apt-get, its output in $TMP/apt.log: shown on failure, else only the
# maintainer scripts' own lines.
run_apt() {
	if DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@" >"$TMP/apt.log" 2>&1; then
		grep -E '^(attune|Setting up attune|Removing attune|Purging|Unpacking attune)' "$TMP/apt.log" | sed 's/^/  apt: /'
		return 0
	fi
	sed 's/^/  apt: /' "$TMP/apt.log" >&2
	return 1
}
apt_install() {
	run_apt install --install-recommends "$@" || { apt-get update -q >/dev/null && run_apt install --install-recommends "$@"; }
}
apt_install "$ROOT/$DEB" || die "apt-get install $DEB failed"

expect "dpkg status" "$(dpkg-query -W -f='${Status} ${Version}' attune)" "install ok installed $PKG_VERSION"
for p in postgresql rabbitmq-server; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && ok "recommended $p installed" ||
		fail "recommended $p not installed"
done
pw=$(getent passwd attune) || die "user attune was not created"
IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
ok "user attune: $pw"
expect "attune home" "$home" /var/lib/attune
[[ $shell == */nologin || $shell == /bin/false ]] && ok "attune shell $shell" || fail "attune has a login shell: $shell"
[[ $uid -lt 1000 ]] && ok "attune is a system user (uid $uid)" || fail "attune uid $uid is not a system uid"
expect "attune primary group" "$(getent group "$gid" | cut -d: -f1)" attune
expect "/var/lib/attune" "$(stat -c '%A %U:%G' /var/lib/attune 2>&1)" "drwxr-x--- attune:attune"
expect "/etc/attune/attune.yaml" "$(stat -c '%A %U:%G' /etc/attune/attune.yaml 2>&1)" "-rw-r----- root:attune"
expect "/usr/bin/attune" "$(stat -c '%A %U:%G' /usr/bin/attune 2>&1)" "-rwxr-xr-x root:root"
expect "unit" "$(stat -c '%A %U:%G' /usr/lib/systemd/system/attune.service 2>&1)" "-rw-r--r-- root:root"
v=$(/usr/bin/attune version 2>&1)
[[ $v == *"$VERSION"* ]] && ok "installed attune version: $v" || fail "installed attune version: $v"
if out=$(runuser -u attune -- /usr/bin/attune config --config /etc/attune/attune.yaml 2>&1); then
	grep -q '^data_dir: /var/lib/attune$' <<<"$out" && ok "attune user reads its config; data_dir /var/lib/attune" ||
		fail "attune config as attune: data_dir is not /var/lib/attune: $out"
else
	fail "attune user cannot load /etc/attune/attune.yaml: $out"
fi
if command -v systemd-analyze >/dev/null; then
	out=$(systemd-analyze verify /usr/lib/systemd/system/attune.service 2>&1)
	rc=$?
	[[ $rc -eq 0 && -z $out ]] && ok "systemd-analyze verify (installed unit): clean" || fail "systemd-analyze verify installed unit (rc $rc): $out"
fi

# Start the appliance the way attune.service does: the unit's ExecStart, as
# attune:attune, in /var/lib/attune, umask 0027, HOME=/var/lib/attune, a clean
# environment. setpriv execs (no fork), so $! is attune itself and gets SIGTERM.
EXEC_START=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/attune.service)
HTTP_ADDR=127.0.0.1:8080
if ss -ltnH 'sport = :8080' 2>/dev/null | grep -q .; then
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18080)
	HTTP_ADDR=127.0.0.1:$port
	echo "  note: port 8080 is busy; using ATTUNE__HTTP__ADDR=$HTTP_ADDR"
fi
# The unit's file system sandbox, rebuilt with a private mount namespace:
# ProtectSystem=strict (everything read-only but /dev, /proc, /sys and the
# StateDirectory), PrivateTmp (fresh /tmp, /var/tmp), ProtectHome (/home, /root
# empty). So the test fails if the appliance writes anywhere else.
# shellcheck disable=SC2016
SANDBOX_SH='
set -e
mount --bind /var/lib/attune /var/lib/attune
for mp in $(awk "{print \$2}" /proc/self/mounts | sort -u); do
	case $mp in /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /var/lib/attune) continue ;; esac
	mount -o remount,bind,ro "$mp" 2>/dev/null || true
done
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
for d in /home /root; do [ -d $d ] && mount -t tmpfs -o ro,mode=0755 tmpfs $d; done
touch /usr/.attune-sandbox-probe 2>/dev/null && { echo "sandbox: / is writable" >&2; exit 1; }
exec "$@"'
SANDBOX=${SANDBOX:-1}
if [[ $SANDBOX == 1 ]] && ! unshare --mount sh -c "$SANDBOX_SH" sh true 2>/dev/null; then
	echo "  note: cannot build the ProtectSystem/PrivateTmp/ProtectHome sandbox here (unshare/mount); running without it"
	SANDBOX=0
fi
start_server() { # LOGFILE
	local -a envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/attune
		USER=attune LOGNAME=attune LANG=C.UTF-8)
	[[ $HTTP_ADDR != 127.0.0.1:8080 ]] && envs+=(ATTUNE__HTTP__ADDR=$HTTP_ADDR)
	local -a sandbox=()
	[[ $SANDBOX == 1 ]] && sandbox=(unshare --mount sh -c "$SANDBOX_SH" sh)
	# shellcheck disable=SC2086
	(cd /var/lib/attune && umask 0027 &&
		exec "${sandbox[@]}" env -i "${envs[@]}" setpriv --reuid=attune --regid=attune --init-groups -- $EXEC_START) >"$1" 2>&1 &
	SERVER_PID=$!
	echo "  started pid $SERVER_PID: $EXEC_START (as attune, http $HTTP_ADDR$([[ $SANDBOX == 1 ]] && echo ", read-only / but /var/lib/attune, private /tmp, no /home /root"))"
}
wait_ready() { # LOGFILE
	local t0=$SECONDS code
	while ((SECONDS - t0 < READY_TIMEOUT)); do
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			wait "$SERVER_PID"
			fail "attune exited (status $?) before it was ready; its log:"
			sed 's/^/    | /' "$1" >&2
			SERVER_PID=""
			return 1
		fi
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$HTTP_ADDR/readyz" 2>/dev/null)
		if [[ $code == 200 ]]; then
			ok "/readyz 200 after $((SECONDS - t0)) s"
			return 0
		fi
		sleep 1
	done
	fail "/readyz not 200 within ${READY_TIMEOUT} s (last: ${code:-none}); log:"
	sed 's/^/    | /' "$1" >&2
	return 1
}
check_tree_user() { # every process under attune's pid runs as attune
	local bad n
	bad=$(ps -e -o pid=,ppid=,user= | awk -v root="$SERVER_PID" '
		{ parent[$1] = $2; user[$1] = $3 }
		END { for (p in parent) { q = p; while ((q in parent) && q != root && q + 0 > 1) q = parent[q]
			if (q == root && user[p] != "attune") print p, user[p] } }')
	n=$(ps -u attune -o pid= | wc -l)
	if [[ -z $bad ]]; then ok "all $n processes of the appliance run as attune"; else fail "processes under attune not owned by attune: $bad"; fi
	ps -u attune -o pid,args | cut -c1-150 | sed 's/^/    /'
}
stop_server() { # LOGFILE
	local t0=$SECONDS rc
	kill -TERM "$SERVER_PID"
	while kill -0 "$SERVER_PID" 2>/dev/null && ((SECONDS - t0 < STOP_TIMEOUT)); do sleep 1; done
	if kill -0 "$SERVER_PID" 2>/dev/null; then
		fail "attune did not exit within ${STOP_TIMEOUT} s of SIGTERM; log tail:"
		tail -30 "$1" | sed 's/^/    | /' >&2
		kill -KILL "$SERVER_PID"
		wait "$SERVER_PID" 2>/dev/null
	else
		wait "$SERVER_PID"
		rc=$?
		[[ $rc -eq 0 ]] && ok "attune exited 0 after SIGTERM in $((SECONDS - t0)) s" || {
			fail "attune exited $rc after SIGTERM; log tail:"
			tail -30 "$1" | sed 's/^/    | /' >&2
		}
	fi
	SERVER_PID=""
	local left i
	for i in 1 2 3 4 5; do
		left=$(attune_pids)
		[[ -z $left ]] && break
		sleep 1
	done
	if [[ -n $left ]]; then
		fail "processes of user attune left after the stop: $(ps -o pid=,args= -p "$(paste -sd, <<<"$left")" | tr '\n' ';')"
		kill_attune_leftovers stop
	else
		ok "no processes of user attune left"
	fi
	[[ -n ${KEEP_LOGS:-} ]] && mkdir -p "$KEEP_LOGS" && cp "$1" "$KEEP_LOGS/"
}

step "run the installed appliance as attune"
start_server "$TMP/serve1.log"
if wait_ready "$TMP/serve1.log"; then
	expect "admin token" "$(stat -c '%a %U:%G' /var/lib/attune/admin.token 2>&1)" "600 attune:attune"
	[[ -s /var/lib/attune/admin.token ]] && ok "admin token not empty" || fail "admin token empty"
	check_tree_user
	if [[ $SANDBOX == 1 ]]; then
		[[ $(readlink /proc/$SERVER_PID/ns/mnt) != "$(readlink /proc/self/ns/mnt)" ]] &&
			ok "attune runs in the sandbox (own mount namespace)" || fail "attune is not in the sandbox mount namespace"
	fi
	echo "  data dir: $(find /var/lib/attune -maxdepth 1 | sort | tr '\n' ' ')"
	root_owned=$(find /var/lib/attune -not -user attune 2>/dev/null | head -5)
	[[ -z $root_owned ]] && ok "everything in /var/lib/attune belongs to attune" || fail "not owned by attune: $root_owned"
fi
[[ -n $SERVER_PID ]] && stop_server "$TMP/serve1.log"
TOKEN_SUM=$(sha256sum /var/lib/attune/admin.token 2>/dev/null | cut -d' ' -f1)

step "upgrade to a newer version (data, user and a local config change survive)"
UP_VERSION=${PKG_VERSION}+upgradetest
DIST="$TMP/dist2" PKG_VERSION="$UP_VERSION" ATTUNE_BIN="$BIN" VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE" \
	scripts/package.sh >"$TMP/package2.log" 2>&1 || { cat "$TMP/package2.log"; die "building the upgrade packages failed"; }
dpkg --compare-versions "$UP_VERSION" gt "$PKG_VERSION" || fail "$UP_VERSION does not sort after $PKG_VERSION"
UP_DEB=$(. "$TMP/dist2/attune-package.env" && echo "$DEB")
UP_RPM=$(. "$TMP/dist2/attune-package.env" && echo "$RPM")
echo "# local change $$" >>/etc/attune/attune.yaml
uid_before=$(id -u attune)
apt_install "$UP_DEB" || die "upgrade install failed"
expect "dpkg status after upgrade" "$(dpkg-query -W -f='${Status} ${Version}' attune)" "install ok installed $UP_VERSION"
grep -qx "# local change $$" /etc/attune/attune.yaml && ok "local config change kept" || fail "upgrade overwrote /etc/attune/attune.yaml"
ls /etc/attune/attune.yaml.dpkg-* 2>/dev/null && fail "unexpected .dpkg-* files in /etc/attune"
expect "user attune kept (uid)" "$(id -u attune 2>&1)" "$uid_before"
expect "admin token kept" "$(sha256sum /var/lib/attune/admin.token 2>/dev/null | cut -d' ' -f1)" "$TOKEN_SUM"
start_server "$TMP/serve2.log"
if wait_ready "$TMP/serve2.log"; then
	expect "admin token unchanged by restart" "$(sha256sum /var/lib/attune/admin.token 2>/dev/null | cut -d' ' -f1)" "$TOKEN_SUM"
fi
[[ -n $SERVER_PID ]] && stop_server "$TMP/serve2.log"

step "purge"
run_apt purge attune || fail "apt-get purge attune failed"
st=$(dpkg-query -W -f='${Status}' attune 2>/dev/null)
[[ -z $st || $st == "unknown ok not-installed" ]] && ok "dpkg knows no attune after purge" || fail "dpkg status after purge: $st"
for p in /usr/bin/attune /usr/lib/systemd/system/attune.service /etc/attune /var/lib/attune /usr/share/doc/attune; do
	[[ -e $p ]] && fail "$p still exists after purge" || ok "$p gone"
done
getent passwd attune >/dev/null && fail "user attune still exists after purge" || ok "user attune gone"
getent group attune >/dev/null && fail "group attune still exists after purge" || ok "group attune gone"

# ---------------------------------------------------------------- rpm scriptlets, for real
step "rpm: install, upgrade, erase with rpm (scriptlets with \$1; --nodeps, private rpmdb)"
if [[ -n ${SKIP_RPM_INSTALL:-} ]] || ! command -v rpm >/dev/null; then
	echo "  skipped"
	exit 0
fi
RPMDB=$TMP/rpmdb
mkdir -p "$RPMDB"
RPMOPTS=(--dbpath "$RPMDB" --nodeps)
rpm --help 2>&1 | grep -q -- --force-debian && RPMOPTS+=(--force-debian)
rpm --dbpath "$RPMDB" --initdb || die "rpm --initdb failed"
rpm -i "${RPMOPTS[@]}" "$RPM" || die "rpm -i failed"
getent passwd attune >/dev/null && ok "rpm %pre created user attune" || fail "rpm %pre did not create user attune"
expect "rpm: config" "$(stat -c '%A %U:%G' /etc/attune/attune.yaml 2>&1)" "-rw-r----- root:attune"
expect "rpm: /var/lib/attune" "$(stat -c '%A %U:%G' /var/lib/attune 2>&1)" "drwxr-x--- attune:attune"
echo "token" >/var/lib/attune/admin.token
echo "# local change rpm" >>/etc/attune/attune.yaml
rpm -U "${RPMOPTS[@]}" "$UP_RPM" || fail "rpm -U failed"
expect "rpm version after upgrade" "$(rpm --dbpath "$RPMDB" -q --qf '%{VERSION}' attune)" "$UP_VERSION"
[[ -f /var/lib/attune/admin.token ]] && ok "rpm upgrade kept the data" || fail "rpm upgrade removed the data"
grep -qx "# local change rpm" /etc/attune/attune.yaml && ok "rpm upgrade kept the local config change" ||
	fail "rpm upgrade replaced the modified config"
getent passwd attune >/dev/null && ok "rpm upgrade kept user attune" || fail "rpm upgrade removed user attune"
rpm -e "${RPMOPTS[@]}" attune || fail "rpm -e failed"
[[ -e /usr/bin/attune ]] && fail "/usr/bin/attune still there after rpm -e" || ok "rpm -e removed /usr/bin/attune"
[[ -f /etc/attune/attune.yaml.rpmsave ]] && ok "rpm -e saved the modified config as .rpmsave" ||
	fail "no /etc/attune/attune.yaml.rpmsave after rpm -e"
[[ -d /var/lib/attune ]] && ok "rpm -e kept /var/lib/attune (no purge in rpm)" || fail "rpm -e removed /var/lib/attune"
getent passwd attune >/dev/null && ok "rpm -e kept user attune (Fedora guideline)" || fail "rpm -e removed user attune"
remove_leftovers rpm-test
exit 0
