#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the real-browser tests (tests/browser/), from the Debian
# packages chromium and chromium-driver. Quiet when both are there; installs them with apt-get (as root,
# or with passwordless sudo) when they are not; one `error:` line and exit 3 when that cannot be done.
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
if { [ -n "${KOPE_CHROMIUM:-}" ] || have chromium || have chromium-browser || have google-chrome; } &&
   { [ -n "${KOPE_CHROMEDRIVER:-}" ] || have chromedriver; }; then
    exit 0
fi
fail() {
    echo "error: headless Chromium for the browser tests is missing and $1; install the Debian packages chromium and chromium-driver (or set KOPE_CHROMIUM and KOPE_CHROMEDRIVER)" >&2
    exit 3
}
have apt-get || fail "apt-get is not available"
sudo=""
if [ "$(id -u)" != 0 ]; then
    sudo -n true 2>/dev/null || fail "installing it needs root (or passwordless sudo)"
    sudo="sudo -n"
fi
echo "› installing headless Chromium for the browser tests (apt-get: chromium chromium-driver, a ~120 MB download)" >&2
log="$(mktemp -t kope-browser-install-XXXXXX.log)"
if ! { $sudo apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver; } \
       >"$log" 2>&1; then
    fail "apt-get could not install it (log: $log)"
fi
rm -f "$log"
