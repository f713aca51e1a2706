# Packaging targets (included by the top-level Makefile: -include make/*.mk).
#
#   make package       dist/attune_<v>_amd64.deb, dist/attune-<v>.x86_64.rpm,
#                      dist/attune_<v>_linux_amd64.tar.gz (nfpm v2.45.2, pinned in
#                      scripts/package.sh and installed into bin/nfpm on first use)
#   make test-package  builds and inspects them; as root on Debian also installs,
#                      runs, upgrades and purges the .deb (scripts/test-package.sh)
#
# VERSION, COMMIT and DATE are passed through when the Makefile (or the
# environment) defines them; otherwise scripts/package.sh computes them the same
# way (git describe --tags --always --dirty without the "v", else 0.0.0-dev).
# GOARCH=arm64 builds arm64/aarch64 packages.

.PHONY: package test-package

package:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" DATE="$(DATE)" scripts/package.sh

test-package:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" DATE="$(DATE)" scripts/test-package.sh
