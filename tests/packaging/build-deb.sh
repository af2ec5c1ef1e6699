#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the Debian binary package of the tree at SRC, as a packager would, and lints it:
#   - copies SRC's git-tracked and untracked non-ignored files into a fresh directory under /tmp
#     (dpkg-buildpackage writes its results into the parent of the source tree: never SRC's);
#   - copies tests/packaging/debian to debian/ there;
#   - with VERSION (e.g. 0.1.0~prev-1), makes it the top version of debian/changelog and its
#     upstream part (0.1.0~prev) meson.build's project version, so that the binaries' --version
#     tell two builds apart (the upgrade test builds a "previous" and a current package);
#   - dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS nocheck parallel=2), log in OUTDIR;
#   - lintian --fail-on error,warning on the .deb (info tags shown, they do not fail);
#   - moves the .deb into OUTDIR and prints its path, its size and its Installed-Size.
# Exit 0 when the package built and lintian found no error and no warning; 1 otherwise, also when
# a tool is missing (tests/setup.sh installs them). Leaves nothing in SRC; runs again over the same
# OUTDIR (the .deb and the log are replaced). No network.
#
# Usage: build-deb.sh SRC OUTDIR [VERSION]
set -euo pipefail

die() { echo "build-deb.sh: $*" >&2; exit 1; }

if [ $# -lt 2 ] || [ $# -gt 3 ]; then die "usage: build-deb.sh SRC OUTDIR [VERSION]"; fi
src=$(cd "$1" && pwd) || die "no source tree at '$1'"
mkdir -p "$2"
out=$(cd "$2" && pwd)
version=${3:-}

for tool in git tar dpkg-buildpackage dpkg-deb dh lintian; do
        command -v "$tool" >/dev/null || die "'$tool' is missing (tests/setup.sh installs debhelper, dpkg-dev and lintian)"
done
[ -d "$src/tests/packaging/debian" ] || die "'$src' has no tests/packaging/debian"
[ ! -e "$src/debian" ] || die "'$src' has a debian/ of its own; the recipe is tests/packaging/debian"

if [ -n "$version" ]; then
        case $version in
                *[!A-Za-z0-9.+~-]* | [!0-9]*) die "'$version' is not a Debian version" ;;
        esac
        upstream=${version%-*}          # 0.1.0~prev-1 -> 0.1.0~prev; no revision: the same
else
        version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$src/tests/packaging/debian/changelog")
        upstream=
fi

started=$(date +%s%N)
work=$(mktemp -d /tmp/sandbox-runner-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree=$work/sandbox-runner-${version%-*}
mkdir "$tree"

# The files git knows of, tracked or not ignored, that exist (a deleted tracked file is skipped).
git -C "$src" ls-files -z --cached --others --exclude-standard --deduplicate |
        (cd "$src" && while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) |
        tar -C "$src" --null --no-recursion -T - -cf - | tar -C "$tree" -xf -
cp -a "$tree/tests/packaging/debian" "$tree/debian"

if [ -n "$upstream" ]; then
        sed -i "1s/^\(sandbox-runner\) ([^)]*)/\1 ($version)/" "$tree/debian/changelog"
        # The first "version : '...'" of meson.build is project()'s.
        sed -i "0,/^\(\s*version\s*:\s*\)'[^']*'/s//\1'$upstream'/" "$tree/meson.build"
        grep -q "^sandbox-runner ($version) " "$tree/debian/changelog" || die "could not set the changelog's version"
        grep -qF "version : '$upstream'" "$tree/meson.build" || die "could not set meson.build's project version"
fi

log=$out/build-deb.log
echo "Building sandbox-runner $version from $src (log: $log)"
if ! (cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "dpkg-buildpackage failed (whole log: $log)"
fi

debs=("$work"/sandbox-runner_*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then die "expected one sandbox-runner_*.deb, found: ${debs[*]}"; fi
deb=${debs[0]}

echo "lintian:"
rc=0
# Not as root (lintian warns against it): as nobody where this runs as root, on a readable copy.
lint=(lintian --fail-on "error,warning" --display-info)
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        chmod 0755 "$work"
        chmod 0644 "$deb"
        lint=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work" TMPDIR=/tmp "${lint[@]}")
fi
"${lint[@]}" "$deb" >"$work/lintian.out" 2>&1 || rc=$?
if [ -s "$work/lintian.out" ]; then sed 's/^/  /' "$work/lintian.out"; else echo "  (nothing)"; fi
[ "$rc" -eq 0 ] || die "lintian found errors or warnings (exit $rc)"

mv -f "$deb" "$out/"
deb=$out/$(basename "$deb")
echo "deb: $deb"
echo "size: $(stat -c %s "$deb") bytes"
echo "Installed-Size: $(dpkg-deb -f "$deb" Installed-Size) KiB"
echo "version: $(dpkg-deb -f "$deb" Version)"
elapsed=$((($(date +%s%N) - started) / 1000000))
printf 'built and linted in %d.%03d s\n' $((elapsed / 1000)) $((elapsed % 1000))
