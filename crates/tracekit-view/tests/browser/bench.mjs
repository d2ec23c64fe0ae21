// Times `tracekit memtrace view` in chromium on one trace (not a test: a
// measurement for docs/performance.md). Prints medians of 5 runs of: the page
// ready after navigation, a filter change (allocated in the middle third), a
// tab switch to the flame graph, a zoom, and the server's peak RSS; then the
// filter change and the flame graph tab again, timed inside the page (from the
// click to the idle status, without this process's round trips to the
// browser, which the first figures include). Then, on a
// server of its own, `/api/info` and the page while 8 distinct slow queries
// (`top --by backtrace --limit N`) run, asked from this process (a browser
// would queue the ninth request itself, at six connections), and that
// server's peak RSS and anonymous memory at its highest.
//
//   node bench.mjs TRACE.ctf
//
// TRACEKIT names the binary (default target/release/tracekit); a viewer that
// prints no token in its URL is measured too.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const root = path.resolve(import.meta.dirname, '../../../..');
const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
const trace = path.resolve(process.argv[2]);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function start() {
  const server = spawn(tracekit, ['memtrace', 'view', trace], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = new Promise((resolve) => {
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+\/(\?token=[0-9a-f]+)?) /.exec(out);
      if (m) resolve(m[1]);
    });
  });
  return { server, url };
}
const statusMb = (pid, key) =>
  Math.round(readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`${key}:\\s+(\\d+)`))[1] / 1024);
const peakMb = (pid) => statusMb(pid, 'VmHWM');

const t0 = Date.now();
const { server, url: waiting } = start();
const url = await waiting;
const token = new URL(url).searchParams.get('token') ?? '';
const auth = { headers: { Authorization: 'Bearer ' + token } };
console.log(`server up (trace read) in ${Date.now() - t0} ms`);
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const idle = (page) =>
  page.waitForFunction(() => document.getElementById('status').textContent === '', null, { timeout: 120000 });
// The trace's duration in seconds, as the page's server says.
const duration = (page) =>
  page.evaluate(
    (h) =>
      fetch('/api/info', h)
        .then((r) => r.json())
        .then((i) => i.duration_us / 1e6),
    auth,
  );
const times = { ready: [], filter: [], flame: [], zoom: [] };
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  let t = Date.now();
  await page.goto(url + '#run=' + run);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120000 });
  await idle(page);
  times.ready.push(Date.now() - t);
  const dur = await duration(page);
  t = Date.now();
  await page.fill('#f-from', (dur / 3 + run * 1e-3).toFixed(3) + 's');
  await page.fill('#f-to', ((2 * dur) / 3).toFixed(3) + 's');
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
// Inside the page: each click, then the status polled until idle.
const clicked = (selector) =>
  new Promise((resolve) => {
    const t = performance.now();
    document.querySelector(selector).click();
    const poll = () => {
      const idle = document.getElementById('status').textContent === '';
      if (idle && document.body.dataset.ready === 'true') resolve(performance.now() - t);
      else setTimeout(poll, 2);
    };
    setTimeout(poll, 2);
  });
times['filter in page'] = [];
times['flame in page'] = [];
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(url + '#page-run=' + run);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120000 });
  await idle(page);
  const dur = await duration(page);
  // Times not asked above, so that no answer is one the server kept.
  await page.fill('#f-from', (dur / 3 + run * 1e-3 + 5e-4).toFixed(4) + 's');
  await page.fill('#f-to', ((2 * dur) / 3).toFixed(3) + 's');
  // A second for the server to finish what earlier pages asked.
  await new Promise((r) => setTimeout(r, 1000));
  times['filter in page'].push(Math.round(await page.evaluate(clicked, '#apply')));
  await page.evaluate(() => document.querySelector('#flame')?.replaceChildren());
  await new Promise((r) => setTimeout(r, 1000));
  times['flame in page'].push(Math.round(await page.evaluate(clicked, 'button[data-tab="flame"]')));
  await page.close();
}
for (const [k, v] of Object.entries(times)) console.log(`${k}: median ${median(v)} ms (${v.join(', ')})`);
console.log(`server peak RSS ${peakMb(server.pid)} MB`);
await browser.close();
server.kill('SIGINT');

// Eight slow queries at once, on a fresh server; the info asked 5 times while
// they run.
const busy = start();
const base = new URL(await busy.url);
const busyAuth = { headers: { Authorization: 'Bearer ' + (base.searchParams.get('token') ?? '') } };
// A 503 while the trace is still read is asked again, as a script should.
const api = async (q) => {
  for (;;) {
    const r = await fetch(new URL('/api/' + q, base), busyAuth);
    if (r.status === 503) {
      await new Promise((done) => setTimeout(done, 100));
      continue;
    }
    if (!r.ok) throw new Error(`${q}: ${r.status} ${await r.text()}`);
    return r.text();
  }
};
await api('info');
// The anonymous memory (the server's own, not the mapped files') at its
// highest while they run, read every 50 ms.
let anonMb = statusMb(busy.server.pid, 'RssAnon');
const sampler = setInterval(() => (anonMb = Math.max(anonMb, statusMb(busy.server.pid, 'RssAnon'))), 50);
const slowStart = Date.now();
const slow = [];
for (let n = 1; n <= 8; n++)
  slow.push(api(`top?arg=--by&arg=backtrace&arg=--limit&arg=${n}`).then(() => Date.now() - slowStart));
const infos = [];
for (let i = 0; i < 5; i++) {
  await new Promise((r) => setTimeout(r, 100));
  const t = Date.now();
  await api('info');
  await fetch(base);
  infos.push(Date.now() - t);
}
const ends = await Promise.all(slow);
console.log(
  `info and page while 8 slow queries run: median ${median(infos)} ms (${infos.join(', ')}); the queries ended at ${ends.join(', ')} ms`,
);
clearInterval(sampler);
console.log(`server peak RSS under them ${peakMb(busy.server.pid)} MB, anonymous at most ${anonMb} MB`);
busy.server.kill('SIGINT');
