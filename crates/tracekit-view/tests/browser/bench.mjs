// Times `tracekit memtrace view` in chromium on one trace (not a test: a
// measurement for docs/performance.md). Prints medians of 5 runs of: the page
// ready after navigation, a filter change (allocated in the middle third), a
// tab switch to the flame graph, a zoom, and the server's peak RSS.
//
//   node bench.mjs TRACE.ctf
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const root = path.resolve(import.meta.dirname, '../../../..');
const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
const trace = path.resolve(process.argv[2]);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const t0 = Date.now();
const server = spawn(tracekit, ['memtrace', 'view', trace], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve) => {
  let out = '';
  server.stdout.on('data', (d) => { out += d; const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out); if (m) resolve(m[1]); });
});
console.log(`server up (trace read) in ${Date.now() - t0} ms`);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
const idle = (page) => page.waitForFunction(() => document.getElementById('status').textContent === '', null, { timeout: 120000 });
const times = { ready: [], filter: [], flame: [], zoom: [] };
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  let t = Date.now();
  await page.goto(url + '#run=' + run);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120000 });
  await idle(page);
  times.ready.push(Date.now() - t);
  const dur = await page.evaluate(() => fetch('/api/info').then((r) => r.json()).then((i) => i.duration_us / 1e6));
  t = Date.now();
  await page.fill('#f-from', (dur / 3 + run * 1e-3).toFixed(3) + 's');
  await page.fill('#f-to', (2 * dur / 3).toFixed(3) + 's');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('from='));
  await idle(page);
  times.filter.push(Date.now() - t);
  t = Date.now();
  await page.click('button[data-tab="flame"]');
  await page.waitForSelector('#flame div');
  await idle(page);
  times.flame.push(Date.now() - t);
  t = Date.now();
  await page.locator('#flame div').nth(1).click();
  await page.waitForFunction(() => location.hash.includes('zoom='));
  times.zoom.push(Date.now() - t);
  await page.close();
}
const rss = readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1];
for (const [k, v] of Object.entries(times)) console.log(`${k}: median ${median(v)} ms (${v.join(', ')})`);
console.log(`server peak RSS ${Math.round(rss / 1024)} MB`);
await browser.close();
server.kill('SIGINT');
