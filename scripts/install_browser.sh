#!/usr/bin/env bash
# usage: bash scripts/install_browser.sh [--help]
#
# Install Debian's Chromium for the browser tests (tests/jupyter/test_browser.py) and the
# cell-latency benchmark (bench/bench_cell_latency.py).
#
# Idempotent: does nothing when /usr/bin/chromium already runs; runs `apt-get update`
# only when the package is not known to apt yet. Playwright drives this browser with
# executable_path="/usr/bin/chromium"; never run `playwright install` (no browser
# downloads). Exits non-zero with a message saying what failed.
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi

CHROMIUM=/usr/bin/chromium
say() { printf 'install_browser: %s\n' "$*"; }
fail() { printf 'install_browser: ERROR: %s\n' "$*" >&2; exit 1; }

if [ -x "$CHROMIUM" ] && version=$("$CHROMIUM" --version 2>/dev/null); then
    say "already installed: $version ($CHROMIUM); nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install Chromium by hand at $CHROMIUM"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "not root and no sudo: run as root to install chromium"
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# apt-cache policy prints "Candidate: (none)" (or nothing) when the lists lack the package.
candidate=$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
    say "chromium not in the apt lists; running apt-get update"
    $SUDO apt-get update || fail "apt-get update failed"
    candidate=$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
        fail "no 'chromium' package in the configured apt sources"
    fi
else
    say "apt lists already know chromium $candidate; skipping apt-get update"
fi

say "installing chromium $candidate (apt-get install -y --no-install-recommends chromium)"
$SUDO apt-get install -y --no-install-recommends chromium || fail "apt-get install chromium failed"

[ -x "$CHROMIUM" ] || fail "chromium installed but $CHROMIUM is missing"
version=$("$CHROMIUM" --version 2>/dev/null) || fail "$CHROMIUM --version failed"
say "installed: $version ($CHROMIUM)"
