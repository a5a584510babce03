"""Opens meshplan HTML reports in headless Chromium (through Playwright for Python, with the
system's Chromium: no browser is downloaded) and checks that every chart rendered: each
[data-chart] element holds one SVG with a nonzero box and drawn content, the page logged no script
or console error and requested nothing from a network. Saves a full-page screenshot of the first
report.

Usage: python scripts/check_report.py CHROMIUM SCREENSHOT REPORT=chart,chart... ...
Exits 1 on any failure, listing every problem.
"""

import pathlib
import shutil
import sys
import tempfile

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

MEASURE = """() => [...document.querySelectorAll('[data-chart]')].map((element) => {
  const svgs = element.querySelectorAll('svg');
  const svg = svgs[0];
  const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
  const content = svg ? svg.getBBox() : { width: 0, height: 0 };
  return {
    id: element.id,
    chart: element.dataset.chart,
    svgs: svgs.length,
    width: box.width,
    height: box.height,
    contentWidth: content.width,
    contentHeight: content.height,
    shapes: svg ? svg.querySelectorAll('rect, circle, path, polyline, polygon, line').length : 0,
    texts: svg ? [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim()).length : 0,
  };
})"""


def check(context, file: str, expected: list[str], screenshot: str | None) -> list[str]:
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console error: {message.text}"))

    def request(request):
        if not request.url.startswith(("file:", "data:")):
            problems.append(f"network request: {request.url}")

    page.on("request", request)
    page.goto(pathlib.Path(file).resolve().as_uri(), wait_until="load")
    charts = page.evaluate(MEASURE)
    found = [c["chart"] for c in charts]
    if found != expected:
        problems.append(f"charts {','.join(found) or 'none'}, expected {','.join(expected)}")
    for c in charts:
        what = f"chart {c['chart']} (#{c['id']})"
        if c["svgs"] != 1:
            problems.append(f"{what} holds {c['svgs']} SVG elements, expected 1")
        if not (c["width"] > 0 and c["height"] > 0):
            problems.append(f"{what} has an empty box {c['width']}x{c['height']}")
        if not (c["contentWidth"] > 0 and c["contentHeight"] > 0):
            problems.append(f"{what} draws nothing")
        if c["shapes"] == 0 or c["texts"] == 0:
            problems.append(f"{what} has {c['shapes']} shapes and {c['texts']} labels")
    if screenshot:
        pathlib.Path(screenshot).resolve().parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=screenshot, full_page=True)
    page.close()
    for c in charts:
        print(f"  {c['chart']}: {round(c['width'])}x{round(c['height'])} px, "
              f"{c['shapes']} shapes, {c['texts']} labels")
    return problems


def main() -> int:
    executable, screenshot, *reports = sys.argv[1:]
    profile = tempfile.mkdtemp(prefix="meshplan-report-chromium-")
    failed = 0
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                viewport={"width": 1300, "height": 900},
                args=CHROMIUM_ARGS,
            )
            try:
                for index, spec in enumerate(reports):
                    file, charts = spec.split("=")
                    print(f"{file}:")
                    problems = check(context, file, charts.split(","),
                                     screenshot if index == 0 else None)
                    for problem in problems:
                        print(f"  FAIL {problem}")
                    failed += len(problems)
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if failed:
        print(f"{failed} problem(s) in the reports")
        return 1
    print(f"every chart rendered; screenshot {screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
