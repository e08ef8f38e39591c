#!/usr/bin/env bash
# Install Debian's prometheus when it is missing: `lyra up --local --prometheus` and
# tests/ray/test_observability.py need a real one. Never fails the build: where it cannot
# be installed it says so plainly, and that test is skipped with the same reason.
set -u
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "prometheus: not installed and no apt-get here; install it to use --prometheus (the observability test will be skipped)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "prometheus: not installed and not root: run 'sudo apt-get install prometheus' (the observability test will be skipped)"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "prometheus: installing Debian's package (apt-get install prometheus) ..."
if ! $SUDO apt-get install -y -q --no-install-recommends prometheus >/tmp/lyra-apt-prometheus.log 2>&1; then
  $SUDO apt-get update -q >>/tmp/lyra-apt-prometheus.log 2>&1
  $SUDO apt-get install -y -q --no-install-recommends prometheus >>/tmp/lyra-apt-prometheus.log 2>&1
fi
if command -v prometheus >/dev/null 2>&1; then
  echo "prometheus: installed ($(prometheus --version 2>&1 | head -1))"
else
  echo "prometheus: could not be installed (see /tmp/lyra-apt-prometheus.log); the observability test will be skipped"
fi
exit 0
