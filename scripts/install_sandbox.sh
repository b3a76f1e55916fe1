#!/usr/bin/env bash
# usage: bash scripts/install_sandbox.sh [--help]
#
# Install bubblewrap (bwrap), the sandbox the isolated executor runs model code in
# (rlm_kernel/executors/sandbox.py).  Without it the isolated executor refuses to start
# (a clear error naming the package); it never runs model code without its wall.
#
# Idempotent: does nothing when bwrap already runs; runs `apt-get update` only when the
# package is not known to apt yet.  On other distributions install the package named
# bubblewrap with their package manager (dnf, pacman, apk, zypper).  Exits non-zero
# with a message saying what failed.
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi

say() { printf 'install_sandbox: %s\n' "$*"; }
fail() { printf 'install_sandbox: ERROR: %s\n' "$*" >&2; exit 1; }

if command -v bwrap >/dev/null 2>&1 && version=$(bwrap --version 2>/dev/null); then
    say "already installed: $version ($(command -v bwrap)); nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install the package 'bubblewrap' with this system's package manager"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "not root and no sudo: run as root to install bubblewrap"
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

candidate=$(apt-cache policy bubblewrap 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
    say "bubblewrap not in the apt lists; running apt-get update"
    $SUDO apt-get update || fail "apt-get update failed"
fi
say "installing bubblewrap (apt-get install -y --no-install-recommends bubblewrap)"
$SUDO apt-get install -y --no-install-recommends bubblewrap || fail "apt-get install bubblewrap failed"
version=$(bwrap --version 2>/dev/null) || fail "bubblewrap installed but bwrap does not run"
say "installed: $version"
