#!/usr/bin/env bash
# ensure_deb.sh PACKAGE WHAT [FILE]: install Debian's PACKAGE when it is missing: when no
# command of its name is on PATH, or, given FILE, when FILE does not exist (a package of
# headers has no command). `make test` needs prometheus (tests/ray/test_observability.py,
# `lyra up --local --prometheus`), chromium (tests/ray/test_page.py opens the operator's
# page in it, headless; ~35 s to install here), redis-server (tests/chaos/test_head_recovery.py:
# the GCS's external store, so that a head can die and come back), gcc and python3.11-dev
# (`make native`, the simulator's compiled core). Never fails the build: where it cannot be installed it says
# so plainly, and WHAT (what needs it) is skipped with the same reason; under .ci/run
# (LYRA_CI=1) such a test, or the compiled core's build, fails instead.
set -u
PKG="$1"
WHAT="$2"
FILE="${3:-}"
LOG="/tmp/lyra-apt-$PKG.log"
present() {
  if [ -n "$FILE" ]; then [ -e "$FILE" ]; else command -v "$PKG" >/dev/null 2>&1; fi
}
if present; then
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
if present; then
  echo "$PKG: installed"
else
  echo "$PKG: could not be installed (see $LOG); $WHAT will be skipped"
fi
exit 0
