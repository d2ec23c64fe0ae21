// What both browser tests share: the paths they read, a chromium launched
// before them and closed after, `tracekit` servers started as a user starts
// them (their cache in the run's own folder, not the user's) and stopped with
// Ctrl-C, and pages opened once their first frame is drawn.
import { before, after } from 'node:test';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const root = path.resolve(import.meta.dirname, '../../../..');
export const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
export const corpus = path.resolve(root, process.env.CORPUS ?? '../shared/corpus');
export const shots = path.join(root, 'target/view-screenshots');
export const scratch = mkdtempSync(path.join(os.tmpdir(), 'tracekit-view-test-'));
const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const servers = [];
let browser;

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: browserPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const s of servers) s.kill('SIGINT');
  rmSync(scratch, { recursive: true, force: true });
});

// Runs `tracekit ARGS...` and resolves to the page's URL it prints.
export function serve(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(tracekit, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, XDG_CACHE_HOME: scratch },
    });
    servers.push(child);
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`view exited with ${code}: ${out}${err}`)));
  });
}

export async function settled(page) {
  await page.waitForFunction(() => document.getElementById('status').textContent === '');
}

// Once the page has written its URL: it does so 100 ms after the last change,
// so a page settled sooner (an answer quicker than that) may still show the
// URL of an earlier step.
export function urlWritten() {
  return new Promise((done) => setTimeout(done, 300));
}

// A new page, nothing loaded.
export function blank(viewport) {
  return browser.newPage(viewport ? { viewport } : {});
}

// A page at `url` once its first frame is drawn and nothing is loading.
export async function open(url, viewport = { width: 1280, height: 900 }) {
  const page = await browser.newPage({ viewport });
  page.on('pageerror', (e) => {
    throw e;
  });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  await settled(page);
  return page;
}
