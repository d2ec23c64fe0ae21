// The scale bench (not a test: a measurement for docs/performance.md).
// Generates FXT and memtrace traces at the sizes users have, serves each
// with `tracekit view` twice (a fresh cache folder, then the cache the first
// start wrote) and measures, server-side over HTTP (no browser):
//
// - the time from the start to the URL and to the first answer (a window of
//   all tracks on 1,600 pixels, or `top`);
// - the server's anonymous memory at its highest while it builds and answers
//   (`RssAnon` of /proc/PID/status, read every 50 ms) and its peak resident
//   memory (`VmHWM`, which counts the mapped files' pages too);
// - the cache file's size against the trace's;
// - on the second start, once the cache is read back, the clicks: each
//   asked once (distinct parameters, so that no answer is kept from
//   another), the median of three.
//
//   node scale-bench.mjs [small|large|all] [memtrace|fxt]
//
// `small` (the default): FXT 300 MB and memtrace of 9.9 M events and 30 M
// allocations; `large` adds FXT 1.2 GB; `all` adds FXT 5 GB and 100 M
// allocations. A second argument keeps the cases of one format. TRACEKIT names the binary served (default
// target/release/tracekit); GENERATOR the one that writes the traces
// (default TRACEKIT: a binary without `fxt sample` can be measured on
// traces another writes); SCRATCH the folder for the traces and caches
// (default the system's temporary folder; the largest case needs 20 GB).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../../../..');
const tracekit = path.resolve(root, process.env.TRACEKIT ?? 'target/release/tracekit');
const generator = path.resolve(root, process.env.GENERATOR ?? tracekit);
const scratch = process.env.SCRATCH ?? os.tmpdir();
const which = process.argv[2] ?? 'small';
const format = process.argv[3];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (bytes) => Math.round(bytes / 1e6);

// What the page asks first, and the clicks; `k` makes each asked once.
const FXT_CLICKS = {
  'window, whole trace': (k, span) => `window?from=0&to=${span - k}&px=1600`,
  'window, a hundredth': (k, span) =>
    `window?from=${Math.floor(span / 2) + k}&to=${Math.floor(span / 2 + span / 100)}&px=1600`,
  'selection, whole trace': (k, span) => `selection?from=${k}&to=${span}`,
  'flame, a tenth': (k, span) => `flame?from=${k}&to=${Math.floor(span / 10)}`,
};
const MEMTRACE_CLICKS = {
  top: (k) => `top?limit=${20 + k}`,
  'top --function': (k) => `top?limit=${20 + k}&function=Module_023.fn_232`,
  'top --min-size 64': (k) => `top?limit=${20 + k}&min-size=64`,
  'top --never-collected': (k) => `top?limit=${20 + k}&never-collected=`,
  'top --between (a twentieth)': (k, span) =>
    `top?limit=${20 + k}&between=${(span / 2).toFixed(3)}s,${(span / 2 + span / 20).toFixed(3)}s`,
  'top --by function': (k) => `top?limit=${20 + k}&by=function`,
  timeline: (k) => `timeline?points=${400 + k}`,
};

const CASES = [
  { name: 'FXT 300 MB', file: 'scale-300m.fxt', args: ['fxt', 'sample', '--slices', '12500000', '--threads', '16'] },
  { name: 'memtrace 9.9 M events', file: 'scale-e10m.ctf', args: ['memtrace', 'sample', '--allocs', '5500000'] },
  { name: 'memtrace 30 M allocations', file: 'scale-s30m.ctf', args: ['memtrace', 'sample', '--allocs', '30000000'] },
  {
    name: 'FXT 1.2 GB',
    file: 'scale-1200m.fxt',
    args: ['fxt', 'sample', '--slices', '50000000', '--threads', '16'],
    from: 'large',
  },
  {
    name: 'FXT 5 GB',
    file: 'scale-5g.fxt',
    args: ['fxt', 'sample', '--slices', '208000000', '--threads', '16'],
    from: 'all',
  },
  {
    name: 'memtrace 100 M allocations',
    file: 'scale-s100m.ctf',
    args: ['memtrace', 'sample', '--allocs', '100000000'],
    from: 'all',
  },
];
const LEVELS = ['small', 'large', 'all'];

function status(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => +(new RegExp(`${key}:\\s+(\\d+)`).exec(s)?.[1] ?? 0) * 1024;
  return { anon: kb('RssAnon'), hwm: kb('VmHWM') };
}

// Starts `tracekit view FILE` with its cache under `cache`; resolves once
// the URL is printed, with the server, its URL's parts and the time taken.
function start(file, cache) {
  const t0 = performance.now();
  const server = spawn(tracekit, ['view', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, XDG_CACHE_HOME: cache },
  });
  let err = '';
  server.stderr.on('data', (d) => (err += d));
  let anon = 0;
  const sampler = setInterval(() => {
    try {
      anon = Math.max(anon, status(server.pid).anon);
    } catch {
      // The server has ended.
    }
  }, 50);
  return new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]+)/.exec(out);
      if (m) {
        resolve({
          server,
          port: m[1],
          token: m[2],
          up: performance.now() - t0,
          t0,
          err: () => err,
          peakAnon: () => Math.max(anon, status(server.pid).anon),
          stop: () => clearInterval(sampler),
        });
      }
    });
    server.on('exit', (code) => reject(new Error(`view exited with ${code}: ${err}`)));
  });
}

// Asks `path` until it is answered (a timeline being built answers 503);
// the status, the body's size and the time taken.
async function ask(s, q) {
  const t = performance.now();
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${s.port}/api/${q}`, {
      headers: { Authorization: `Bearer ${s.token}` },
    });
    const body = await r.text();
    if (r.status === 503) {
      await new Promise((done) => setTimeout(done, 50));
      continue;
    }
    if (r.status !== 200) throw new Error(`${q}: ${r.status} ${body}`);
    return { ms: performance.now() - t, bytes: body.length, body };
  }
}

async function stopped(s) {
  s.stop();
  s.server.kill('SIGINT');
  await new Promise((r) => s.server.on('exit', r));
}

function cacheBytes(cache) {
  const dir = path.join(cache, 'tracekit/tables');
  if (!existsSync(dir)) return 0;
  return readdirSync(dir)
    .map((f) => statSync(path.join(dir, f)).size)
    .reduce((a, b) => a + b, 0);
}

// One case: its trace made if it is not there, served cold and warm.
async function measure(c) {
  const file = path.join(scratch, c.file);
  if (!existsSync(file)) execFileSync(generator, ['-q', ...c.args, '-o', file], { stdio: 'inherit' });
  const size = statSync(file).size;
  const cache = mkdtempSync(path.join(scratch, 'tracekit-scale-cache-'));
  const fxt = file.endsWith('.fxt');
  const first = fxt ? 'window?from=0&px=1600' : 'top';
  const row = { name: c.name, size };
  for (const run of ['cold', 'warm']) {
    const s = await start(file, cache);
    await ask(s, first);
    const answered = performance.now() - s.t0;
    // A memtrace trace is answered by passes over the trace until its
    // tables are built or read back, which a note says: the cold start is
    // stopped only after it (else it keeps nothing), the warm one's clicks
    // wait for it.
    while (!/note: the trace's .* (kept in|not kept|read back)/.test(s.err())) {
      await new Promise((done) => setTimeout(done, 50));
    }
    const ready = performance.now() - s.t0;
    row[run] = { up: s.up, first: answered, ready, anon: s.peakAnon(), hwm: status(s.server.pid).hwm };
    if (run === 'warm') {
      const span = fxt
        ? JSON.parse((await ask(s, 'tracks')).body).span_ns
        : JSON.parse((await ask(s, 'info')).body).duration_us / 1e6;
      row.clicks = {};
      for (const [label, make] of Object.entries(fxt ? FXT_CLICKS : MEMTRACE_CLICKS)) {
        const times = [];
        let bytes = 0;
        for (let k = 1; k <= 3; k++) {
          const r = await ask(s, make(k, span));
          times.push(r.ms);
          bytes = r.bytes;
        }
        row.clicks[label] = { ms: median(times), bytes };
      }
      row.warm.anon = s.peakAnon();
      row.warm.hwm = status(s.server.pid).hwm;
    }
    await stopped(s);
  }
  row.cache = cacheBytes(cache);
  rmSync(cache, { recursive: true, force: true });
  return row;
}

const level = LEVELS.indexOf(which);
if (level < 0) throw new Error(`${which}: small, large or all`);
mkdirSync(scratch, { recursive: true });
console.log(`tracekit: ${tracekit}`);
console.log(
  '| trace | start to URL, cold / warm | first answer, cold / warm | built or read back, cold / warm | anonymous at most, cold / warm | peak resident, cold / warm | cache file / trace |',
);
console.log('|---|---|---|---|---|---|---|');
const clicks = [];
const ofFormat = (c) => !format || c.file.endsWith(format === 'fxt' ? '.fxt' : '.ctf');
for (const c of CASES.filter((c) => LEVELS.indexOf(c.from ?? 'small') <= level && ofFormat(c))) {
  const r = await measure(c);
  const s = (x) => (x / 1000).toFixed(2);
  console.log(
    `| ${r.name} (${mb(r.size)} MB) | ${s(r.cold.up)} / ${s(r.warm.up)} s | ${s(r.cold.first)} / ${s(r.warm.first)} s | ` +
      `${s(r.cold.ready)} / ${s(r.warm.ready)} s | ` +
      `${mb(r.cold.anon)} / ${mb(r.warm.anon)} MB | ${mb(r.cold.hwm)} / ${mb(r.warm.hwm)} MB | ` +
      `${mb(r.cache)} MB (${(r.cache / r.size).toFixed(2)}×) |`,
  );
  for (const [label, k] of Object.entries(r.clicks))
    clicks.push(`| ${r.name} | ${label} | ${Math.round(k.ms)} ms | ${Math.round(k.bytes / 1000)} KB |`);
}
console.log('\n| trace | click, from the cache | median of 3 | answer |\n|---|---|---|---|');
for (const line of clicks) console.log(line);
