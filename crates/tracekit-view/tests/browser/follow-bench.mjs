// The follow bench (not a test: a measurement for docs/performance.md). Writes
// a generated trace to a new file in pieces, at a steady rate, while
// `tracekit view --follow` serves that file, and measures, server-side over
// HTTP (no browser):
//
// - how many times the server made its answers again while the file grew;
// - the time from the last write to the answer that counts every record (`stats`'s
//   records for FXT, `info`'s events for memtrace), the writer still holding
//   the file;
// - the server's anonymous memory at its highest (`RssAnon`, read every 50 ms).
//
//   node follow-bench.mjs [MB/s]
//
// Cases: FXT of 60 MB and 150 MB (2.5 M and 6.2 M slices) and memtrace of
// 80 MB (5.5 M allocations), written at MB/s (default 20) in pieces every
// 100 ms. TRACEKIT names the binary (default target/release/tracekit); SCRATCH
// the folder for the traces (default the system's temporary folder).
import { spawn, execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../../../..');
const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
const dir = mkdtempSync(path.join(process.env.SCRATCH ?? os.tmpdir(), 'tracekit-follow-bench-'));
const rate = Number(process.argv[2] ?? 20) * 1e6;
const PERIOD_MS = 100;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function generate(name, args) {
  const file = path.join(dir, name);
  if (!existsSync(file)) execFileSync(tracekit, ['-q', ...args, '-o', file]);
  return file;
}

// Runs `tracekit view --follow FILE`; resolves to the server and its address.
function serve(file) {
  return new Promise((resolve, reject) => {
    const child = spawn(tracekit, ['-q', 'view', '--follow', '--no-cache', file], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]+)/.exec(out);
      if (m) resolve({ child, port: m[1], token: m[2] });
    });
    child.on('exit', (code) => reject(new Error(`view exited with ${code}: ${out}`)));
  });
}

async function ask(server, endpoint) {
  const r = await fetch(`http://127.0.0.1:${server.port}/api/${endpoint}`, {
    headers: { Authorization: 'Bearer ' + server.token },
  });
  return r.ok ? r.json() : null;
}

function rssAnonKiB(pid) {
  const m = /RssAnon:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

async function follow(label, whole, endpoint, field) {
  const expected = JSON.parse(
    execFileSync(
      tracekit,
      endpoint === 'stats' ? ['fxt', 'stats', '--json', whole] : ['memtrace', 'info', '--json', whole],
    ),
  )[field];
  const bytes = readFileSync(whole);
  const piece = Math.max(1, Math.round((rate * PERIOD_MS) / 1000));
  const live = path.join(dir, 'live' + path.extname(whole));
  const fd = openSync(live, 'w');
  writeSync(fd, bytes, 0, Math.min(piece, bytes.length));
  const server = await serve(live);
  let peak = 0;
  const watch = setInterval(() => (peak = Math.max(peak, rssAnonKiB(server.child.pid))), 50);
  const started = Date.now();
  for (let at = piece; at < bytes.length; at += piece) {
    writeSync(fd, bytes, at, Math.min(piece, bytes.length - at));
    await sleep(PERIOD_MS);
  }
  const last = Date.now();
  for (;;) {
    const answer = await ask(server, endpoint);
    if (answer && answer[field] === expected) break;
    await sleep(5);
  }
  const latency = Date.now() - last;
  const generations = (await ask(server, 'features')).followed.generation;
  clearInterval(watch);
  closeSync(fd);
  server.child.kill('SIGINT');
  const seconds = (last - started) / 1000;
  console.log(
    `| ${label} | ${Math.round(bytes.length / 1e6)} MB at ${Math.round(bytes.length / 1e6 / seconds)} MB/s | ` +
      `${generations} | ${latency} ms | ${Math.round(peak / 1024)} MiB |`,
  );
}

console.log('| trace | written | answers made | whole after the last write | peak RssAnon |');
console.log('|---|---|---|---|---|');
await follow(
  'FXT, 2.5 M slices',
  generate('f60.fxt', ['fxt', 'sample', '--slices', '2450000', '--threads', '16']),
  'stats',
  'records',
);
await follow(
  'FXT, 6.2 M slices',
  generate('f150.fxt', ['fxt', 'sample', '--slices', '6100000', '--threads', '16']),
  'stats',
  'records',
);
await follow(
  'memtrace, 5.5 M allocations',
  generate('m.ctf', ['memtrace', 'sample', '--allocs', '5500000']),
  'info',
  'events',
);
rmSync(dir, { recursive: true, force: true });
