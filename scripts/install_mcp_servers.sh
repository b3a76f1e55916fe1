#!/usr/bin/env bash
# usage: bash scripts/install_mcp_servers.sh [--help]
#
# Install the npm packages the MCP tests drive (tests/mcp_both_ways): the reference
# filesystem server (@modelcontextprotocol/server-filesystem) and the MCP Inspector's
# command line (@modelcontextprotocol/inspector), at the versions and sha512 integrity
# hashes of requirements/mcp-npm/package-lock.json, into build/mcp-npm/node_modules.
#
# Idempotent: does nothing when build/mcp-npm holds this lock already. Installs Node.js
# and npm with apt when npm is missing. Never runs the packages' install scripts.
# Exits non-zero with a message saying what failed.
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi

HERE="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$HERE/requirements/mcp-npm"
DEST="$HERE/build/mcp-npm"
say() { printf 'install_mcp_servers: %s\n' "$*"; }
fail() { printf 'install_mcp_servers: ERROR: %s\n' "$*" >&2; exit 1; }

if ! command -v npm >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fail "npm not found and no apt-get: install Node.js 18+ and npm"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || fail "npm is missing; run as root or install nodejs and npm"
        SUDO="sudo"
    fi
    say "installing nodejs and npm with apt"
    $SUDO apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null \
        || fail "apt-get install nodejs npm failed"
fi

if [ -f "$DEST/package-lock.json" ] && cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json" \
        && [ -x "$DEST/node_modules/.bin/mcp-server-filesystem" ] \
        && [ -x "$DEST/node_modules/.bin/mcp-inspector" ]; then
    say "already installed ($DEST); nothing to do"
    exit 0
fi

mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
say "npm install (the lock's versions and hashes) into $DEST"
(cd "$DEST" && npm install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error) \
    || fail "npm install failed (see above)"
for bin in mcp-server-filesystem mcp-inspector; do
    [ -x "$DEST/node_modules/.bin/$bin" ] || fail "$bin is missing after npm install"
done
say "installed: $(cd "$DEST" && node -e 'const p=require("./package-lock.json").packages; for (const k of ["node_modules/@modelcontextprotocol/server-filesystem","node_modules/@modelcontextprotocol/inspector"]) console.log(k.split("/").slice(1).join("/")+"@"+p[k].version)' | tr '\n' ' ')"
