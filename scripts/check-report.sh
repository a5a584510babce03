#!/usr/bin/env bash
# Browser check of the HTML reports: writes the report of the default `meshplan search` and of the
# default `meshplan simulate`, opens each in headless Chromium and fails unless every chart
# rendered (each [data-chart] element holds a non-empty SVG with a nonzero box) with no script
# error and no network request. Saves a full-page screenshot of the search report.
#
# Usage: scripts/check-report.sh [SCREENSHOT.png]    (default target/report-screenshot.png)
# Needs node and npm; uses Debian's Chromium at /usr/bin/chromium, installed when missing if CI is
# set or when run as root. playwright-core comes from the npm registry into target/report-check/
# (no browser is downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."

screenshot="${1:-target/report-screenshot.png}"
chromium=/usr/bin/chromium
playwright_version=1.65.1
work=target/report-check

if [ ! -x "$chromium" ]; then
  if [ -n "${CI:-}" ] || [ "$(id -u)" = 0 ]; then
    echo "installing chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
  else
    echo "error: $chromium is missing (apt-get install chromium)" >&2
    exit 1
  fi
fi
for tool in node npm; do
  command -v "$tool" > /dev/null || { echo "error: $tool is missing" >&2; exit 1; }
done

mkdir -p "$work"
if [ ! -f "$work/node_modules/playwright-core/package.json" ] ||
  [ "$(node -p "require('./$work/node_modules/playwright-core/package.json').version")" != "$playwright_version" ]; then
  echo "installing playwright-core $playwright_version into $work"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$work" --no-save --no-audit --no-fund \
    --loglevel=error "playwright-core@$playwright_version" > /dev/null
fi

cargo build --release --locked --quiet
reports="$work/reports"
rm -rf "$reports"
mkdir -p "$reports"
target/release/meshplan search --report "$reports/search.html" > /dev/null
target/release/meshplan simulate --report "$reports/simulate.html" > /dev/null

node scripts/check-report.cjs "$work" "$chromium" "$screenshot" \
  "$reports/search.html=memory,step-time,timeline,scatter,rejections" \
  "$reports/simulate.html=memory,step-time,timeline"
