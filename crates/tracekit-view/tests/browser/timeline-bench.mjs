// Times `tracekit view` of a timeline in chromium (not a test: a measurement
// for docs/performance.md). Prints: the time from starting the command to the
// first frame drawn (`body[data-ready]`), twice (the second start reads the
// cache file the first wrote); then the medians and maxima of 20 zooms (W) and
// 20 pans (D) at the mouse, each from the key press to the next idle status
// with the new window drawn; the page's JS heap; the server's peak RSS.
//
//   node timeline-bench.mjs TRACE.fxt
//
// TRACEKIT names the binary (default target/release/tracekit); XDG_CACHE_HOME
// is set to a fresh folder so that the first start builds.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const root = path.resolve(import.meta.dirname, '../../../..');
const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
const trace = path.resolve(process.argv[2]);
const cache = mkdtempSync(path.join(os.tmpdir(), 'tracekit-timeline-bench-'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const peakMb = (pid) => Math.round(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1] / 1024);

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--enable-precise-memory-info',
  ],
});

async function run(label, interact) {
  const t0 = Date.now();
  const server = spawn(tracekit, ['-q', 'view', trace], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, XDG_CACHE_HOME: cache },
  });
  const url = await new Promise((resolve) => {
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/.exec(out);
      if (m) resolve(m[1]);
    });
  });
  const up = Date.now() - t0;
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120000 });
  await page.waitForFunction(() => document.getElementById('status').textContent === '');
  console.log(`${label}: server up in ${up} ms, first frame drawn ${Date.now() - t0} ms after the start`);
  if (interact) {
    const b = await page.locator('#timeline').boundingBox();
    await page.mouse.move(b.x + 200 + (b.width - 214) * 0.37, b.y + 300);
    const step = async (key) => {
      const t = Date.now();
      // The next window answer drawn: the status goes busy, then idle.
      await page.keyboard.press(key);
      await page.waitForFunction(() => document.getElementById('status').textContent === '');
      return Date.now() - t;
    };
    const zooms = [];
    const parts = [];
    for (let i = 0; i < 20; i++) {
      zooms.push(await step('w'));
      parts.push(await page.evaluate(() => window.tracekitTiming()));
    }
    for (const k of ['request', 'parse', 'draw', 'bytes']) {
      console.log(`  zoom in, ${k}: median ${Math.round(median(parts.map((p) => p[k])))}`);
    }
    const pans = [];
    for (let i = 0; i < 20; i++) pans.push(await step(i % 2 ? 'a' : 'd'));
    const outs = [];
    for (let i = 0; i < 20; i++) outs.push(await step('s'));
    console.log(
      `zoom in: median ${median(zooms)} ms, max ${Math.max(...zooms)} ms; ` +
        `pan: median ${median(pans)} ms, max ${Math.max(...pans)} ms; ` +
        `zoom out: median ${median(outs)} ms, max ${Math.max(...outs)} ms`,
    );
    const heap = await page.evaluate(() => performance.memory.usedJSHeapSize);
    console.log(`page JS heap ${Math.round(heap / 1e6)} MB`);
  }
  console.log(`server peak RSS ${peakMb(server.pid)} MB`);
  await page.close();
  server.kill('SIGINT');
  await new Promise((r) => server.on('exit', r));
}

await run('first start', true);
await run('second start', false);
await browser.close();
rmSync(cache, { recursive: true, force: true });
