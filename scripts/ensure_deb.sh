#!/usr/bin/env bash
# ensure_deb.sh PACKAGE WHAT: install Debian's PACKAGE (its command has the same name) when
# it is missing. `make test` needs prometheus (tests/ray/test_observability.py, `lyra up
# --local --prometheus`) and chromium (tests/ray/test_page.py opens the operator's page in
# it, headless; ~35 s to install here). Never fails the build: where it cannot be
# installed it says so plainly, and WHAT (the test that needs it) is skipped with the
# same reason; under .ci/run (LYRA_CI=1) such a test fails instead of skipping.
set -u
PKG="$1"
WHAT="$2"
LOG="/tmp/lyra-apt-$PKG.log"
if command -v "$PKG" >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$PKG: not installed and no apt-get here ($WHAT will be skipped)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "$PKG: not installed and not root: run 'sudo apt-get install $PKG' ($WHAT will be skipped)"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "$PKG: installing Debian's package (apt-get install $PKG) ..."
if ! $SUDO apt-get install -y -q --no-install-recommends "$PKG" >"$LOG" 2>&1; then
  $SUDO apt-get update -q >>"$LOG" 2>&1
  $SUDO apt-get install -y -q --no-install-recommends "$PKG" >>"$LOG" 2>&1
fi
if command -v "$PKG" >/dev/null 2>&1; then
  echo "$PKG: installed ($("$PKG" --version 2>&1 | head -1))"
else
  echo "$PKG: could not be installed (see $LOG); $WHAT will be skipped"
fi
exit 0
