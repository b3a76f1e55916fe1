#!/usr/bin/env bash
# usage: bash scripts/install_sandbox.sh [--help]
#
# Install bubblewrap (bwrap), the sandbox the isolated executor runs model code in
# (rlm_kernel/executors/sandbox.py), and libseccomp (libseccomp.so.2), which builds the
# worker's system call filter (rlm_kernel/executors/syscall_filter.py).  Without them
# the isolated executor refuses to start (a clear error naming the package); it never
# runs model code without its wall.
#
# Idempotent: does nothing when bwrap runs and libseccomp.so.2 is installed; runs
# `apt-get update` only when a package is not known to apt yet.  On other distributions
# install the packages named bubblewrap and libseccomp with their package manager (dnf,
# pacman, apk, zypper).  Exits non-zero with a message saying what failed.
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi

say() { printf 'install_sandbox: %s\n' "$*"; }
fail() { printf 'install_sandbox: ERROR: %s\n' "$*" >&2; exit 1; }

have_libseccomp() {
    local tool
    for tool in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        if "$tool" -p 2>/dev/null | grep -q 'libseccomp\.so\.2 '; then return 0; fi
    done
    return 1
}

packages=()
if command -v bwrap >/dev/null 2>&1 && version=$(bwrap --version 2>/dev/null); then
    say "already installed: $version ($(command -v bwrap))"
else
    packages+=(bubblewrap)
fi
if have_libseccomp; then
    say "already installed: libseccomp.so.2"
else
    packages+=(libseccomp2)
fi
if [ "${#packages[@]}" -eq 0 ]; then
    say "nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install the packages 'bubblewrap' and 'libseccomp' with this system's package manager"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "not root and no sudo: run as root to install bubblewrap"
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

for package in "${packages[@]}"; do
    candidate=$(apt-cache policy "$package" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
        say "$package not in the apt lists; running apt-get update"
        $SUDO apt-get update || fail "apt-get update failed"
        break
    fi
done
say "installing ${packages[*]} (apt-get install -y --no-install-recommends ${packages[*]})"
$SUDO apt-get install -y --no-install-recommends "${packages[@]}" || fail "apt-get install ${packages[*]} failed"
version=$(bwrap --version 2>/dev/null) || fail "bubblewrap installed but bwrap does not run"
have_libseccomp || fail "libseccomp2 installed but libseccomp.so.2 is not found by ldconfig"
say "installed: $version, libseccomp.so.2"
