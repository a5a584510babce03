// Opens meshplan HTML reports in headless Chromium (through playwright-core, with the system's
// Chromium: no browser is downloaded) and checks that every chart rendered: each [data-chart]
// element holds one SVG with a nonzero box and drawn content, the page logged no script or console
// error and requested nothing from a network. Saves a full-page screenshot of the first report.
//
// Usage: node scripts/check-report.cjs MODULES_DIR CHROMIUM SCREENSHOT REPORT=chart,chart... ...
// Exits 1 on any failure, listing every problem.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const [modules, executablePath, screenshot, ...reports] = process.argv.slice(2);
const { chromium } = require(path.resolve(modules, 'node_modules', 'playwright-core'));

async function check(context, file, expected, screenshotPath) {
  const problems = [];
  const page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`script error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith('file:') && !url.startsWith('data:')) problems.push(`network request: ${url}`);
  });
  await page.goto('file://' + path.resolve(file), { waitUntil: 'load' });
  const charts = await page.evaluate(() =>
    [...document.querySelectorAll('[data-chart]')].map((element) => {
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
    }),
  );
  const found = charts.map((c) => c.chart);
  if (found.join(',') !== expected.join(',')) {
    problems.push(`charts ${found.join(',') || 'none'}, expected ${expected.join(',')}`);
  }
  for (const c of charts) {
    const what = `chart ${c.chart} (#${c.id})`;
    if (c.svgs !== 1) problems.push(`${what} holds ${c.svgs} SVG elements, expected 1`);
    if (!(c.width > 0 && c.height > 0)) problems.push(`${what} has an empty box ${c.width}x${c.height}`);
    if (!(c.contentWidth > 0 && c.contentHeight > 0)) problems.push(`${what} draws nothing`);
    if (c.shapes === 0 || c.texts === 0) problems.push(`${what} has ${c.shapes} shapes and ${c.texts} labels`);
  }
  if (screenshotPath) {
    fs.mkdirSync(path.dirname(path.resolve(screenshotPath)), { recursive: true });
    await page.screenshot({ path: screenshotPath, fullPage: true });
  }
  await page.close();
  for (const c of charts) {
    console.log(`  ${c.chart}: ${Math.round(c.width)}x${Math.round(c.height)} px, ${c.shapes} shapes, ${c.texts} labels`);
  }
  return problems;
}

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'meshplan-report-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1300, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  let failed = 0;
  try {
    for (const [index, spec] of reports.entries()) {
      const [file, charts] = spec.split('=');
      console.log(`${file}:`);
      const problems = await check(context, file, charts.split(','), index === 0 ? screenshot : null);
      for (const problem of problems) console.log(`  FAIL ${problem}`);
      failed += problems.length;
    }
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (failed > 0) {
    console.log(`${failed} problem(s) in the reports`);
    process.exit(1);
  }
  console.log(`every chart rendered; screenshot ${screenshot}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
