#!/usr/bin/env bash
# Builds the attune binary and packages it: a .deb and an .rpm (nfpm, pinned
# below) and a .tar.gz. `make package` runs this. Output in dist/:
#   dist/attune_<pkgversion>_<debarch>.deb
#   dist/attune-<pkgversion>.<rpmarch>.rpm
#   dist/attune_<pkgversion>_linux_<goarch>.tar.gz
#   dist/attune-package.env   (the paths above and the versions, for scripts)
#
# Environment (all optional):
#   VERSION, COMMIT, DATE  stamped into the binary (appliance/buildinfo); default:
#                          `git describe --tags --always --dirty` without the
#                          leading "v" (else 0.0.0-dev), the short commit, now (UTC).
#   PKG_VERSION            deb/rpm version; default derived from VERSION (below).
#   GOARCH                 amd64 (default: the host's) or arm64.
#   ATTUNE_BIN             package this prebuilt binary instead of building one.
#   NFPM                   nfpm binary to use; default bin/nfpm, installed at the pinned version.
#   PKG_MAINTAINER         Maintainer field.
#   DIST                   output directory (default dist).
#
# Package version scheme (deb and rpm both sort it correctly; no "-" in it,
# which rpm forbids in a version):
#   tag v1.2.3 exactly             -> 1.2.3
#   tag v1.2.3-rc.1                -> 1.2.3~rc.1          (sorts before 1.2.3)
#   5 commits after tag v1.2.3     -> 1.2.3+git5.gabc1234 (after 1.2.3, before 1.2.4)
#   no tag at all (commit abc1234, -> 0.0.0~git42.gabc1234 (42 = commits in HEAD;
#   the 42nd commit of the branch)                          later commits sort later)
#   uncommitted changes            -> ... + ".dirty" (or "+dirty" on an exact tag)
#   0.0.0-dev (no git)             -> 0.0.0~dev
# The binary keeps the plain git-describe VERSION (`attune version` shows it).
set -euo pipefail

NFPM_VERSION=v2.45.2 # v2.46+ do not install here (a dependency host is blocked)
NFPM_MODULE=github.com/goreleaser/nfpm/v2/cmd/nfpm

cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIST=${DIST:-dist}
mkdir -p "$DIST"

die() {
	echo "package.sh: $*" >&2
	exit 1
}

if [[ -z "${VERSION:-}" ]]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || true)
	VERSION=${VERSION#v}
	VERSION=${VERSION:-0.0.0-dev}
fi
if [[ -z "${COMMIT:-}" ]]; then
	COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
fi
if [[ -z "${DATE:-}" ]]; then
	DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi

# pkg_version VERSION -> a version valid for dpkg and rpm (scheme above).
pkg_version() {
	local v=$1 dirty="" semver='([0-9]+\.[0-9]+\.[0-9]+)(-([0-9A-Za-z.]+))?'
	if [[ $v == *-dirty ]]; then
		v=${v%-dirty}
		dirty=1
	fi
	local out
	if [[ $v =~ ^${semver}-([0-9]+)-g([0-9a-f]+)$ ]]; then
		out=${BASH_REMATCH[1]}
		[[ -n ${BASH_REMATCH[3]} ]] && out+="~${BASH_REMATCH[3]}"
		out+="+git${BASH_REMATCH[4]}.g${BASH_REMATCH[5]}"
		[[ -n $dirty ]] && out+=".dirty"
	elif [[ $v =~ ^${semver}$ ]]; then
		out=${BASH_REMATCH[1]}
		[[ -n ${BASH_REMATCH[3]} ]] && out+="~${BASH_REMATCH[3]}"
		[[ -n $dirty ]] && out+="+dirty"
	elif [[ $v =~ ^[0-9a-f]{4,40}$ ]]; then
		local count
		count=$(git rev-list --count HEAD 2>/dev/null || echo 0)
		out="0.0.0~git${count}.g${v}"
		[[ -n $dirty ]] && out+=".dirty"
	else
		# Anything else (a hand-set VERSION): keep the safe characters.
		out=$(printf '%s' "$v" | tr -c 'A-Za-z0-9.+~' '.')
		[[ $out =~ ^[0-9] ]] || out="0.0.0~${out}"
		[[ -n $dirty ]] && out+=".dirty"
	fi
	printf '%s\n' "$out"
}

PKG_VERSION=${PKG_VERSION:-$(pkg_version "$VERSION")}
[[ $PKG_VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "PKG_VERSION '$PKG_VERSION' is not a valid deb/rpm version"

GOARCH=${GOARCH:-$(go env GOARCH)}
case "$GOARCH" in
amd64) DEB_ARCH=amd64 RPM_ARCH=x86_64 ;;
arm64) DEB_ARCH=arm64 RPM_ARCH=aarch64 ;;
*) die "GOARCH=$GOARCH is not packaged (amd64, arm64)" ;;
esac

# 1. The binary.
if [[ -z "${ATTUNE_BIN:-}" ]]; then
	# Same as the Makefile's `generate`: templ components, when there are any.
	if [[ -n $(find ui -name '*.templ' -print -quit 2>/dev/null) ]]; then
		echo "==> go tool templ generate -path ui"
		go tool templ generate -path ui >/dev/null
	fi
	ATTUNE_BIN=$DIST/build/linux_$GOARCH/attune
	pkg=github.com/attune-io/attune/appliance/buildinfo
	echo "==> go build attune $VERSION ($COMMIT, $DATE) linux/$GOARCH"
	CGO_ENABLED=0 GOOS=linux GOARCH=$GOARCH go build -trimpath \
		-ldflags "-s -w -X $pkg.Version=$VERSION -X $pkg.Commit=$COMMIT -X $pkg.Date=$DATE" \
		-o "$ATTUNE_BIN" ./appliance/cmd/attune
fi
[[ -x "$ATTUNE_BIN" ]] || die "ATTUNE_BIN=$ATTUNE_BIN is not an executable file"

# 2. nfpm, pinned.
if [[ -z "${NFPM:-}" ]]; then
	NFPM=$ROOT/bin/nfpm
	if ! go version -m "$NFPM" 2>/dev/null | grep -q "mod[[:space:]]*github.com/goreleaser/nfpm/v2[[:space:]]*$NFPM_VERSION"; then
		echo "==> go install $NFPM_MODULE@$NFPM_VERSION -> bin/nfpm"
		GOBIN=$ROOT/bin GOFLAGS= go install "$NFPM_MODULE@$NFPM_VERSION"
	fi
fi

# 3. Packages.
DEB=$DIST/attune_${PKG_VERSION}_${DEB_ARCH}.deb
RPM=$DIST/attune-${PKG_VERSION}.${RPM_ARCH}.rpm
TARBALL=$DIST/attune_${PKG_VERSION}_linux_${GOARCH}.tar.gz
export PKG_VERSION ATTUNE_BIN
export PKG_ARCH=$GOARCH
export PKG_MAINTAINER=${PKG_MAINTAINER:-Attune maintainers <maintainers@attune-io.invalid>}
rm -f "$DEB" "$RPM" "$TARBALL"
echo "==> nfpm $NFPM_VERSION: $DEB"
"$NFPM" package --config packaging/nfpm.yaml --packager deb --target "$DEB"
echo "==> nfpm $NFPM_VERSION: $RPM"
"$NFPM" package --config packaging/nfpm.yaml --packager rpm --target "$RPM"

# 4. Tarball: the binary plus the files an unpackaged install needs.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top=attune_${PKG_VERSION}_linux_${GOARCH}
mkdir -p "$stage/$top"
install -m 0755 "$ATTUNE_BIN" "$stage/$top/attune"
install -m 0644 packaging/attune.yaml packaging/attune.service packaging/INSTALL.md "$stage/$top/"
echo "==> tar: $TARBALL"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$TARBALL" "$top"

cat >"$DIST/attune-package.env" <<EOF
VERSION='$VERSION'
COMMIT='$COMMIT'
DATE='$DATE'
PKG_VERSION='$PKG_VERSION'
DEB='$DEB'
RPM='$RPM'
TARBALL='$TARBALL'
EOF
echo "==> done:"
ls -l "$DEB" "$RPM" "$TARBALL"
