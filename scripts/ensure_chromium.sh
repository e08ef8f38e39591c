#!/usr/bin/env bash
# Install Debian's chromium when it is missing: tests/ray/test_page.py opens the operator's
# page in it, headless. Never fails the build: where it cannot be installed it says so
# plainly and the page test skips with the same reason (under .ci/run, LYRA_CI=1, that
# test fails instead of skipping). apt-get install chromium takes ~35 s here.
set -u
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed and no apt-get here; the page test will be skipped"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "chromium: not installed and not root: run 'sudo apt-get install chromium' (the page test will be skipped)"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "chromium: installing Debian's package (apt-get install chromium) ..."
if ! $SUDO apt-get install -y -q --no-install-recommends chromium >/tmp/lyra-apt-chromium.log 2>&1; then
  $SUDO apt-get update -q >>/tmp/lyra-apt-chromium.log 2>&1
  $SUDO apt-get install -y -q --no-install-recommends chromium >>/tmp/lyra-apt-chromium.log 2>&1
fi
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: installed ($(chromium --version 2>/dev/null | head -1))"
else
  echo "chromium: could not be installed (see /tmp/lyra-apt-chromium.log); the page test will be skipped"
fi
exit 0
