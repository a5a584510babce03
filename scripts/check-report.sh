#!/usr/bin/env bash
# Browser check of the HTML reports: writes the report of the default `meshplan search` and of the
# default `meshplan simulate`, opens each in headless Chromium and fails unless every chart
# rendered (each [data-chart] element holds a non-empty SVG with a nonzero box) with no script
# error and no network request. Saves a full-page screenshot of the search report.
#
# Usage: scripts/check-report.sh [SCREENSHOT.png]    (default target/report-screenshot.png)
# Needs Python 3 with venv and pip; uses Debian's Chromium at /usr/bin/chromium, installed when
# missing if CI is set or when run as root. Playwright for Python (its wheel carries its own
# driver) is installed from PyPI into target/report-venv, reused while its pinned versions match;
# no browser is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

screenshot="${1:-target/report-screenshot.png}"
chromium=/usr/bin/chromium
# Playwright and its one dependency, pinned.
requirements="playwright==1.65.2 greenlet==3.5.6"
venv=target/report-venv
work=target/report-check

if [ ! -x "$chromium" ]; then
  if [ -n "${CI:-}" ] || [ "$(id -u)" = 0 ]; then
    echo "check-report: installing chromium with apt-get (a few minutes)"
    apt-get update
    # One line per package fetched and unpacked, so a slow mirror shows where it is.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -o Dpkg::Use-Pty=0 chromium
  else
    echo "error: $chromium is missing (apt-get install chromium)" >&2
    exit 1
  fi
fi

if [ "$(cat "$venv/.requirements" 2> /dev/null)" != "$requirements" ]; then
  echo "check-report: installing $requirements into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # one argument per pinned requirement
  "$venv/bin/pip" install --progress-bar off --disable-pip-version-check $requirements
  echo "$requirements" > "$venv/.requirements"
fi

echo "check-report: building meshplan and writing the reports"
cargo build --release --locked --quiet
reports="$work/reports"
rm -rf "$reports"
mkdir -p "$reports"
target/release/meshplan search --report "$reports/search.html" > /dev/null
target/release/meshplan simulate --report "$reports/simulate.html" > /dev/null

echo "check-report: opening the reports in headless Chromium"
"$venv/bin/python" scripts/check_report.py "$chromium" "$screenshot" \
  "$reports/search.html=memory,step-time,timeline,scatter,rejections" \
  "$reports/simulate.html=memory,step-time,timeline"
