// `tracekit view` of timelines in a real browser (Debian's chromium, driven by
// playwright-core): the corpus's magic-trace output, Jane Street's demo trace,
// the tracing layer's async example, one traced program in two versions, and
// a `perf record` of a threaded C program. What the page shows is checked against `tracekit fxt dump`, read
// here independently of the server. Screenshots go to target/view-screenshots/.
//
//   TRACEKIT=target/release/tracekit CORPUS=../shared/corpus node --test timeline.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import {
  blank,
  corpus,
  open as openPage,
  root,
  scratch,
  serve as serveCommand,
  settled,
  shots,
  tracekit,
  urlWritten,
} from './harness.mjs';

const magic = path.join(corpus, 'fxt/magic_trace_sample.fxt');
const demo = path.join(corpus, 'fxt/jst_tracing_demo.fxt');

// The canvas's layout (canvas.js).
const LABEL = 200;
const HEADER = 18;
const LANE = 17;

function serve(file) {
  return serveCommand(['-q', 'view', file]);
}

function cli(...args) {
  return execFileSync(tracekit, args, { maxBuffer: 1 << 28 }).toString();
}

// The slices of `fxt dump`'s records: complete events, and begin/end pairs
// matched per thread in the order of their times (records of one time in the
// order written), as Perfetto's importer sorts them; each with its thread,
// name, start and end on the trace's clock (ns), and its arguments as the
// dump prints them.
function dumpSlices(file) {
  const slices = [];
  const marks = [];
  for (const line of cli('fxt', 'dump', file).split('\n')) {
    const m =
      /^0x[0-9a-f]+ (duration_complete|duration_begin|duration_end) ts=(\d+)(?: end=(\d+))? thread=(\S+) category="([^"]*)" name="([^"]*)"(?: args=(.*))?$/.exec(
        line,
      );
    if (!m) continue;
    const [, kind, ts, end, thread, category, name, args] = m;
    const slice = { thread, name, category, start: +ts, end: +end, args: args ?? '' };
    if (kind === 'duration_complete') slices.push(slice);
    else marks.push({ kind, slice });
  }
  // Array.prototype.sort is stable.
  marks.sort((p, q) => p.slice.start - q.slice.start);
  const open = new Map();
  for (const { kind, slice } of marks) {
    if (!open.has(slice.thread)) open.set(slice.thread, []);
    const stack = open.get(slice.thread);
    if (kind === 'duration_begin') stack.push(slice);
    else if (stack.length) slices.push({ ...stack.pop(), end: slice.start });
  }
  for (const stack of open.values()) for (const s of stack) slices.push({ ...s, end: Infinity });
  return slices;
}

function open(url) {
  return openPage(url, { width: 1400, height: 900 });
}

async function box(page) {
  return page.locator('#timeline').boundingBox();
}

async function view(page) {
  return page.evaluate(() => window.tracekitView());
}

async function details(page) {
  await page.waitForSelector('#details-table');
  return page.$$eval('#details-table tr', (rows) =>
    Object.fromEntries(rows.map((r) => [r.cells[0].textContent, r.cells[1].textContent])),
  );
}

function threadsOf(file) {
  return Object.keys(JSON.parse(cli('fxt', 'stats', '--json', file)).threads);
}

// The tracks shown are the trace's threads (`pid/tid` as `fxt stats` keys them).
async function assertTracks(page, file) {
  const rows = await page.evaluate(() => window.tracekitRows());
  const shown = rows
    .filter((r) => r.kind === 'track' && !/async/.test(r.label))
    .map((r) => {
      const [, tid, pid] = /\[(\d+)\] · .*\[(\d+)\]$/.exec(r.label);
      return `${pid}/${tid}`;
    });
  assert.deepEqual(shown.sort(), threadsOf(file).sort());
  return rows;
}

test('magic-trace output: tracks, details, zoom and pan, search, a range', async () => {
  const page = await open(await serve(magic));
  await assertTracks(page, magic);
  // Every record counted: the stats endpoint is `fxt stats --json`.
  const stats = await page.evaluate(() =>
    fetch('/api/stats', {
      headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
    }).then((r) => r.json()),
  );
  assert.deepEqual(stats, JSON.parse(cli('fxt', 'stats', '--json', magic)));
  const slices = dumpSlices(magic);
  assert.equal(
    +(await page.textContent('#title')).match(/(\d+) slices/)[1],
    slices.length,
    'the title counts the slices the dump pairs',
  );
  const first = Math.min(...slices.map((s) => s.start));
  await page.screenshot({ path: path.join(shots, 'timeline-magic-trace.png') });

  // A click on the outermost slice: its details are the dump's record.
  const b = await box(page);
  // Under the process's header (one process has one too), the first track.
  const shownRows = await page.evaluate(() => window.tracekitRows());
  assert.equal(shownRows[0].kind, 'process');
  const top = shownRows.find((r) => r.kind === 'track').top;
  await page.mouse.click(b.x + LABEL + 300, b.y + top + HEADER + LANE / 2);
  const d = await details(page);
  const start = +/\((\d+) ns on the trace's clock\)/.exec(d.Start)[1];
  const dur = +/\((\d+) ns\)/.exec(d.Duration)[1];
  const record = slices.find((s) => s.start === start && s.name === d.Name);
  assert.ok(record, `a slice ${d.Name} at ${start} in the dump`);
  assert.equal(dur, record.end - record.start);
  assert.equal(d.symbol, record.name);
  assert.equal(d.Depth, '0');
  assert.match(d.Thread, /\(1\/2\)$/);

  // W zooms in at the mouse, S out, D pans right, A left.
  const whole = await view(page);
  await page.mouse.move(b.x + LABEL + 400, b.y + 300);
  for (let i = 0; i < 6; i++) await page.keyboard.press('w');
  await settled(page);
  const zoomed = await view(page);
  assert.ok(zoomed.to - zoomed.from < (whole.to - whole.from) * 0.3, JSON.stringify(zoomed));
  await page.keyboard.press('d');
  await settled(page);
  const panned = await view(page);
  assert.ok(panned.from > zoomed.from, JSON.stringify({ zoomed, panned }));
  await page.keyboard.press('a');
  await page.keyboard.press('a');
  await settled(page);
  assert.ok((await view(page)).from < panned.from);
  assert.match(page.url(), /#from=\d+&to=\d+/);
  await page.screenshot({ path: path.join(shots, 'timeline-magic-trace-zoomed.png') });
  // Drag pans.
  const before = await view(page);
  await page.mouse.move(b.x + LABEL + 500, b.y + 300);
  await page.mouse.down();
  await page.mouse.move(b.x + LABEL + 300, b.y + 300, { steps: 5 });
  await page.mouse.up();
  await settled(page);
  assert.ok((await view(page)).from > before.from);

  // Search finds every slice whose name contains the text.
  const text = '_dl_map_object';
  const named = slices.filter((s) => s.name.toLowerCase().includes(text)).sort((p, q) => p.start - q.start);
  await page.fill('#search', text);
  await page.press('#search', 'Enter');
  await page.waitForFunction(() => document.getElementById('search-count').dataset.matches !== undefined);
  await settled(page);
  assert.equal(+(await page.getAttribute('#search-count', 'data-matches')), named.length);
  const found = [];
  for (let i = 0; i < named.length; i++) {
    if (i > 0) {
      await page.click('#search-next');
      await page.waitForFunction((n) => document.querySelectorAll('#details-table').length && n, i);
      await settled(page);
    }
    const f = await details(page);
    found.push(+/\((\d+) ns on the trace's clock\)/.exec(f.Start)[1]);
    assert.ok(f.Name.toLowerCase().includes(text), f.Name);
  }
  assert.deepEqual(
    found,
    named.map((s) => s.start),
  );
  await page.screenshot({ path: path.join(shots, 'timeline-magic-trace-search.png') });

  // A range dragged on the axis: its table counts the dump's slices in it.
  await page.keyboard.press('Escape');
  await page.evaluate(() => {
    location.hash = '';
  });
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await settled(page);
  await page.mouse.move(b.x + LABEL + 200, b.y + 10);
  await page.mouse.down();
  await page.mouse.move(b.x + LABEL + 700, b.y + 10, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('#selection-table');
  await settled(page);
  await urlWritten();
  const range = /range=(\d+)%2C(\d+)/.exec(page.url());
  assert.ok(range, page.url());
  const [from, to] = [first + +range[1], first + +range[2]];
  const inRange = slices.filter((s) => s.end > from && s.start < to);
  const byName = new Map();
  for (const s of inRange) byName.set(s.name, (byName.get(s.name) ?? 0) + 1);
  const rows = await page.$$eval('#selection-table tbody tr', (trs) =>
    trs.map((r) => [r.cells[0].textContent, +r.dataset.count]),
  );
  assert.deepEqual(new Map(rows), byName);
  // Its flame graph weighs the time the outermost slices spend in the range:
  // per thread, the part of the range that some slice covers.
  await page.waitForSelector('#flame');
  let covered = 0;
  for (const thread of new Set(inRange.map((s) => s.thread))) {
    const spans = inRange
      .filter((s) => s.thread === thread)
      .map((s) => [Math.max(s.start, from), Math.min(s.end, to)])
      .sort((p, q) => p[0] - q[0]);
    let [a, b] = spans[0];
    for (const [c, d] of spans.slice(1)) {
      if (c > b) {
        covered += b - a;
        [a, b] = [c, d];
      } else b = Math.max(b, d);
    }
    covered += b - a;
  }
  assert.equal(+(await page.getAttribute('#flame', 'data-total')), covered);
  // A click on the first box narrower than the range shows its calls alone;
  // Escape, all again.
  const topRow = () =>
    page.$$eval('#flame > div', (ds) => ds.filter((d) => d.style.top === '0px').map((d) => +d.dataset.total));
  const boxes = await page.$$('#flame > div');
  let widest = null;
  for (const b of boxes) {
    const total = +(await b.getAttribute('data-total'));
    if (total < covered && (await b.boundingBox()).width > 4) {
      widest = total;
      await b.click();
      break;
    }
  }
  assert.ok(widest !== null);
  assert.equal(+(await page.getAttribute('#flame', 'data-total')), widest);
  assert.deepEqual(await topRow(), [widest]);
  await page.keyboard.press('Escape');
  assert.equal(+(await page.getAttribute('#flame', 'data-total')), covered);
  // Inverted: the roots are what the range's calls spend in themselves (their
  // time less their callees'), by name, heaviest first: the server's tree's.
  await page.check('[data-flame-invert]');
  const leaves = await page.$$eval('#flame > div', (ds) =>
    ds.filter((d) => d.style.top === '0px').map((d) => [d.title.split(': ')[0], +d.dataset.total]),
  );
  const selfByName = await page.evaluate(
    ([from, to]) =>
      fetch(`/api/flame?from=${from}&to=${to}&tracks=0`, {
        headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
      })
        .then((r) => r.json())
        .then((t) => {
          const self = t.nodes.map((n) => n[2]);
          for (const n of t.nodes) if (n[0] !== null) self[n[0]] -= n[2];
          const by = new Map();
          t.nodes.forEach((n, i) => by.set(t.names[n[1]], (by.get(t.names[n[1]]) ?? 0) + self[i]));
          return [...by].filter(([, w]) => w > 0).sort((a, b) => b[1] - a[1]);
        }),
    [+range[1], +range[2]],
  );
  assert.deepEqual(leaves, selfByName.slice(0, leaves.length));
  assert.ok(leaves.length > 1);
  assert.ok(leaves.reduce((a, [, w]) => a + w, 0) <= covered);
  assert.equal(+(await page.getAttribute('#flame', 'data-total')), covered);
  await page.uncheck('[data-flame-invert]');
  await page.screenshot({ path: path.join(shots, 'timeline-magic-trace-range.png') });
  await page.locator('#selection').screenshot({ path: path.join(shots, 'timeline-magic-trace-range-flame.png') });

  // The URL holds the view: a reload shows the same range and table.
  await page.reload();
  await page.waitForSelector('#selection-table');
  await settled(page);
  const again = await page.$$eval('#selection-table tbody tr', (trs) => trs.length);
  assert.equal(again, rows.length);
  await page.close();
});

test("Jane Street's demo trace: async track, counter, flow, arguments, pinning", async () => {
  const page = await open(await serve(demo));
  const rows = await assertTracks(page, demo);
  assert.ok(rows.some((r) => r.kind === 'track' && /async/.test(r.label)));
  assert.ok(rows.some((r) => r.kind === 'counter'));
  const slices = dumpSlices(demo);
  // The first slice: its arguments are the record's.
  const b = await box(page);
  const info = await page.evaluate(() =>
    fetch('/api/tracks', {
      headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
    }).then((r) => r.json()),
  );
  const span = info.span_ns;
  const first = slices.sort((p, q) => p.start - q.start)[0];
  const x = LABEL + ((first.start - info.first_ns + 1000) / span) * (b.width - LABEL - 14);
  // Hovered, a slice and a track's name say themselves whole.
  const top = rows.find((r) => r.kind === 'track').top;
  await page.mouse.move(b.x + x, b.y + top + HEADER + LANE / 2);
  assert.match(await page.getAttribute('#timeline', 'title'), new RegExp(`^${first.name} \\(`));
  await page.mouse.move(b.x + 20, b.y + top + 5);
  assert.equal(await page.getAttribute('#timeline', 'title'), rows.find((r) => r.kind === 'track').label);
  await page.mouse.click(b.x + x, b.y + top + HEADER + LANE / 2);
  const d = await details(page);
  assert.equal(d.Name, first.name);
  assert.equal(d.Category, first.category);
  const args = await page.$$eval('#details-table tr.arg', (trs) =>
    trs.map((r) => `"${r.cells[0].textContent}": "${r.cells[1].textContent}"`),
  );
  assert.equal(`{${args.join(', ')}}`, first.args);
  // A click on a track's name pins it above the others.
  const last = rows.filter((r) => r.kind === 'track').at(-1);
  await page.mouse.click(b.x + 20, b.y + last.top + 5);
  await settled(page);
  const pinned = await page.evaluate(() => window.tracekitRows());
  assert.equal(pinned[0].id, last.id);
  assert.equal(pinned[0].pinned, true);
  await page.waitForFunction((id) => location.hash.includes(`pin=${id}`), last.id);
  await page.screenshot({ path: path.join(shots, 'timeline-jst-demo.png') });
  await page.close();
});

test('a Shift+drag selects the tracks it crosses, and its box is drawn over them alone', async () => {
  const three = path.join(scratch, 'three.fxt');
  cli('fxt', 'sample', '-o', three, '--slices', '30000', '--threads', '3');
  // Tall enough for the three tracks of 49 lanes each.
  const page = await openPage(await serve(three), { width: 1400, height: 2600 });
  const b = await box(page);
  const tracks = (await page.evaluate(() => window.tracekitRows())).filter((r) => r.kind === 'track');
  assert.ok(tracks.length >= 3);
  const middle = (r) => b.y + r.top + r.height / 2;
  const select = async (y0, y1) => {
    await page.keyboard.down('Shift');
    await page.mouse.move(b.x + LABEL + 100, y0);
    await page.mouse.down();
    await page.mouse.move(b.x + LABEL + 500, y1, { steps: 5 });
    await page.mouse.up();
    await page.keyboard.up('Shift');
    await page.waitForFunction(() => /range=/.test(location.hash));
    await page.waitForSelector('#selection h2');
    await settled(page);
    await urlWritten();
    const range = /range=([\d%C]+)/.exec(page.url())[1].split('%2C').map(Number);
    const heading = await page.textContent('#selection h2');
    return {
      from: range[0],
      to: range[1],
      tracks: range.slice(2),
      slices: +heading.match(/^(\d+) slices/)[1],
      heading,
    };
  };
  const count = (from, to, ids) =>
    page.evaluate(
      ([from, to, ids]) =>
        fetch(`/api/selection?from=${from}&to=${to}&tracks=${ids.join(',')}`, {
          headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
        })
          .then((r) => r.json())
          .then((j) => j.slices),
      [from, to, ids],
    );
  // Whether the box shades the first two tracks' bands, inside the range.
  const shaded = () =>
    page.evaluate(
      ([x, ys]) => {
        const c = document.getElementById('timeline');
        const ratio = c.width / c.getBoundingClientRect().width;
        const pixel = (y) => c.getContext('2d').getImageData(Math.round(x * ratio), Math.round(y * ratio), 1, 1).data;
        return ys.map((y) => {
          const [r, g, b] = pixel(y);
          return b > r + 8 && b > g;
        });
      },
      [LABEL + 300, [tracks[0].top + 2, tracks[1].top + 2]],
    );
  // At one height: the one track there, and only its band shaded.
  const one = await select(middle(tracks[0]), middle(tracks[0]));
  assert.deepEqual(one.tracks, [tracks[0].id]);
  assert.match(one.heading, / on 1 track$/);
  assert.equal(one.slices, await count(one.from, one.to, [tracks[0].id]));
  assert.deepEqual(await shaded(), [true, false]);
  // From the first track into the second: both, each counted.
  const two = await select(middle(tracks[0]), middle(tracks[1]));
  assert.deepEqual(two.tracks, [tracks[0].id, tracks[1].id]);
  assert.match(two.heading, / on 2 tracks$/);
  const apart = (await count(two.from, two.to, [tracks[0].id])) + (await count(two.from, two.to, [tracks[1].id]));
  assert.equal(two.slices, apart);
  assert.ok(two.slices > one.slices / 2, `${two.slices} slices`);
  assert.deepEqual(await shaded(), [true, true]);
  await page.screenshot({ path: path.join(shots, 'timeline-two-tracks.png') });
  await page.close();
});

test('deep tracks start folded so that every track shows; a toggle unfolds one; a reload keeps folds and scroll', async () => {
  const three = path.join(scratch, 'three-folds.fxt');
  cli('fxt', 'sample', '-o', three, '--slices', '30000', '--threads', '3');
  const page = await open(await serve(three));
  const b = await box(page);
  const tracks = async () => (await page.evaluate(() => window.tracekitRows())).filter((r) => r.kind === 'track');
  const folded = await tracks();
  assert.equal(folded.length, 3);
  for (const r of folded) assert.ok(r.top + r.height <= b.height, `track ${r.id} shows: ${JSON.stringify(r)}`);
  // Folded to their outer lanes, as many as fill the window: the rows end
  // less than a lane above its bottom.
  const rows = await page.evaluate(() => window.tracekitRows());
  const bottom = Math.max(...rows.map((r) => r.top + r.height));
  assert.ok(bottom <= b.height && bottom > b.height - LANE, `the rows end at ${bottom} of ${b.height}`);
  assert.ok(
    folded.every((r) => r.lanes > 1 && r.lanes < 49),
    `tracks of 49 lanes folded to what fits: ${folded.map((r) => r.lanes)}`,
  );
  const toggles = await page.$$eval('[data-track-toggle]', (bs) =>
    bs.map((b) => [+b.dataset.trackToggle, b.getAttribute('aria-expanded')]),
  );
  assert.deepEqual(
    toggles,
    folded.map((r) => [r.id, 'false']),
  );
  await page.screenshot({ path: path.join(shots, 'timeline-folded.png') });
  // The whole trace's slices, folded or not.
  const all = async () => {
    const rows = await tracks();
    return page.evaluate(
      ([span, ids]) =>
        fetch(`/api/selection?from=0&to=${span}&tracks=${ids.join(',')}`, {
          headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
        })
          .then((r) => r.json())
          .then((j) => j.slices),
      [Number.MAX_SAFE_INTEGER, rows.map((r) => r.id)],
    );
  };
  const before = await all();
  // Unfold the first folded track: all its lanes show, and the URL says so.
  const target = folded[0];
  await page.click(`[data-track-toggle="${target.id}"]`);
  await settled(page);
  const unfolded = (await tracks()).find((r) => r.id === target.id);
  assert.equal(unfolded.lanes, 49, JSON.stringify(unfolded));
  assert.equal(await page.getAttribute(`[data-track-toggle="${target.id}"]`, 'aria-expanded'), 'true');
  await page.waitForFunction(() => /fold=/.test(location.hash));
  assert.equal(await all(), before);
  // Scrolled down, then reloaded: the same folds and the same scroll.
  await page.mouse.move(b.x + 600, b.y + 300);
  await page.mouse.wheel(0, 400);
  await page.waitForFunction(() => /[#&]y=[1-9]/.test(location.hash));
  const scrolledRows = await tracks();
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await settled(page);
  assert.deepEqual(await tracks(), scrolledRows);
  await page.close();
});

test("each process's tracks are under its header, which hides and shows them", async () => {
  const two = path.join(corpus, 'fxt/synthetic_all_records.fxt');
  const url = await serve(two);
  const page = await open(url);
  const rows = async () => page.evaluate(() => window.tracekitRows());
  const first = await rows();
  const processes = first.filter((r) => r.kind === 'process');
  assert.deepEqual(
    processes.map((r) => r.id),
    [100, 200],
  );
  const tracksOf = (rs, pid) => rs.filter((r) => r.kind === 'track' && r.label.endsWith(`[${pid}]`));
  const of100 = tracksOf(first, 100).length;
  assert.ok(of100 > 0);
  assert.match(processes[0].label, new RegExp(`\\[100\\] · ${of100} tracks?$`));
  // Every track's header shows under its process's.
  for (const r of first.filter((r) => r.kind === 'track')) {
    const header = processes.find((p) => r.label.endsWith(`[${p.id}]`));
    assert.ok(header.top < r.top, r.label);
  }
  await page.click('[data-process-toggle="100"]');
  await page.waitForFunction(() => /procs=100/.test(location.hash));
  const closed = await rows();
  assert.equal(tracksOf(closed, 100).length, 0, 'process 100 hidden');
  assert.equal(tracksOf(closed, 200).length, tracksOf(first, 200).length);
  assert.equal(await page.getAttribute('[data-process-toggle="100"]', 'aria-expanded'), 'false');
  // A reload keeps it hidden; the toggle shows it again.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  assert.equal(tracksOf(await rows(), 100).length, 0);
  await page.screenshot({ path: path.join(shots, 'timeline-processes.png') });
  await page.click('[data-process-toggle="100"]');
  await page.waitForFunction(() => !/procs=/.test(location.hash));
  assert.equal(tracksOf(await rows(), 100).length, of100);
  await page.close();
});

// The changes table's rows: name, kind, counts, and the change of total
// time as the page prints it.
async function changeRows(page) {
  await page.waitForSelector('#changes-table');
  return page.$$eval('#changes-table tbody tr', (rows) =>
    rows.map((r) => [r.dataset.name, r.dataset.kind, +r.cells[1].textContent, +r.cells[2].textContent]),
  );
}

test('two traces compared: the changes are fxt top --diff, the flame graph coloured by them', async () => {
  const [a, b] = ['a', 'b'].map((x) => path.join(scratch, `compare-${x}.fxt`));
  cli('fxt', 'sample', '-q', '-o', a, '--slices', '20000', '--threads', '2', '--seed', '1');
  cli('fxt', 'sample', '-q', '-o', b, '--slices', '20000', '--threads', '2', '--seed', '2');
  const page = await open(await serveCommand(['-q', 'view', b, '--compare', a]));
  await page.click('[data-compare-whole]');
  const rows = await changeRows(page);
  const expected = JSON.parse(cli('fxt', 'top', '--diff', a, b, '--json', '--limit', '0'));
  assert.ok(expected.names.length > 10);
  assert.deepEqual(
    rows,
    expected.names.map((n) => [n.name, n.kind, n.count_a, n.count_b]),
  );
  // The differential flame graph: every box as wide as its time in B, red
  // where it grew from A, blue where it shrank.
  await settled(page);
  const boxes = await page.$$eval('#flame div[data-name]', (bs) =>
    bs.map((b) => ({ total: +b.dataset.total, base: +b.dataset.base, colour: b.style.background })),
  );
  assert.ok(boxes.length > 10);
  for (const x of boxes) {
    if (x.total > x.base) assert.match(x.colour, /^rgb\(255, /, JSON.stringify(x));
    if (x.total < x.base) assert.match(x.colour, /, 255\)$/, JSON.stringify(x));
  }
  assert.ok(boxes.some((x) => x.total < x.base) && boxes.some((x) => x.total > x.base));
  await page.screenshot({ path: path.join(shots, 'timeline-compare.png'), fullPage: true });
  await page.close();
});

test('one program, one changed function: the comparison names it, as fxt top --diff does', async (t) => {
  const example = path.resolve(path.dirname(tracekit), 'examples/versions');
  if (!existsSync(example)) {
    t.skip(`no ${example} (cargo build --release -p tracekit-tracing --example versions)`);
    return;
  }
  const [a, b] = ['base', 'grown'].map((v) => {
    const fxt = path.join(scratch, `versions-${v}.fxt`);
    execFileSync(example, [v], { env: { ...process.env, TRACEKIT_FXT: fxt } });
    return fxt;
  });
  const page = await open(await serveCommand(['-q', 'view', b, '--compare', a]));
  await page.click('[data-compare-whole]');
  const rows = await changeRows(page);
  const expected = JSON.parse(cli('fxt', 'top', '--diff', a, b, '--json', '--limit', '0'));
  assert.deepEqual(
    rows,
    expected.names.map((n) => [n.name, n.kind, n.count_a, n.count_b]),
  );
  // The same spans in both versions; the changed function's own time grew
  // most.
  assert.deepEqual(expected.names.map((n) => [n.name, n.count_a, n.count_b]).sort(), [
    ['parse_records', 20, 20],
    ['render_pages', 20, 20],
    ['request', 20, 20],
  ]);
  const bySelf = [...expected.names].sort((p, q) => q.self_change_ns - p.self_change_ns);
  assert.equal(bySelf[0].name, 'parse_records');
  // The differential flame graph: each function on one path, its box as wide
  // as its total in B, its baseline its total in A; the changed one red.
  await settled(page);
  const boxes = await page.$$eval('#flame div[data-name]', (bs) =>
    bs.map((b) => ({
      name: b.dataset.name,
      total: +b.dataset.total,
      base: +b.dataset.base,
      colour: b.style.background,
    })),
  );
  for (const n of expected.names) {
    const box = boxes.find((x) => x.name === n.name);
    assert.ok(box, n.name);
    assert.equal(box.total, n.total_ns_b, n.name);
    assert.equal(box.base, n.total_ns_a, n.name);
  }
  assert.match(boxes.find((x) => x.name === 'parse_records').colour, /^rgb\(255, /);
  await page.screenshot({ path: path.join(shots, 'timeline-versions.png'), fullPage: true });
  await page.close();
});

test('two ranges of one trace compared: the baseline range against the selected one', async () => {
  const t = path.join(scratch, 'ranges.fxt');
  cli('fxt', 'sample', '-q', '-o', t, '--slices', '20000', '--threads', '2');
  const url = await serve(t);
  // The first two hundred microseconds of both tracks, then the next two hundred.
  const page = await open(url + '#range=0,200000,0,1');
  await page.waitForSelector('[data-baseline-set]');
  await page.click('[data-baseline-set]');
  await page.waitForSelector('[data-baseline-clear]');
  // The baseline is kept in the URL: a link to another range compares it.
  await page.waitForFunction(() => location.hash.includes('base=0%2C200000%2C0%2C1'));
  await page.close();
  const compared = await open(url + '#range=200000,400000,0,1&base=0,200000,0,1');
  const rows = await changeRows(compared);
  const top = (from, to) => JSON.parse(cli('fxt', 'top', '--json', '--limit', '0', '--between', from, to, t)).names;
  const [before, after] = [top('0us', '200us'), top('200us', '400us')];
  const key = (n) => `${n.name}/${n.kind}`;
  const count = (list) => new Map(list.map((n) => [key(n), n.count]));
  const [ca, cb] = [count(before), count(after)];
  assert.equal(rows.length, new Set([...ca.keys(), ...cb.keys()]).size);
  for (const [name, kind, na, nb] of rows) {
    assert.equal(na, ca.get(`${name}/${kind}`) ?? 0, name);
    assert.equal(nb, cb.get(`${name}/${kind}`) ?? 0, name);
  }
  assert.match(await compared.textContent('.baseline-tools'), /compared with the baseline \(A\)/);
  await compared.screenshot({ path: path.join(shots, 'timeline-ranges.png'), fullPage: true });
  await compared.close();
});

test('a large trace: its URL at once, the build shown on the page, then the timeline', async () => {
  const big = path.join(scratch, 'big.fxt');
  cli('fxt', 'sample', '-o', big, '--slices', '4000000', '--threads', '4');
  const url = await serveCommand(['-q', 'view', '--no-cache', big]);
  const page = await blank({ width: 1400, height: 900 });
  await page.goto(url);
  await page.waitForFunction(() =>
    /^building the timeline: \d+ of \d+ MB read/.test(document.getElementById('status').textContent),
  );
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
  await settled(page);
  const { slices } = JSON.parse(cli('fxt', 'top', '--json', '--limit', '1', big));
  assert.ok(slices >= 4_000_000);
  assert.equal(+(await page.textContent('#title')).match(/(\d+) slices/)[1], slices);
  await page.close();
});

test('a trace cut short: what was read is shown, under a banner', async () => {
  const bytes = readFileSync(demo);
  const cut = path.join(scratch, 'cut.fxt');
  writeFileSync(cut, bytes.subarray(0, 0x1b8));
  const page = await open(await serve(cut));
  assert.equal(await page.isVisible('#damage'), true);
  assert.match(await page.textContent('#damage'), /cut short/);
  const total = await page.evaluate(() => document.getElementById('title').textContent);
  assert.match(total, /4 slices/);
  await page.screenshot({ path: path.join(shots, 'timeline-damaged.png') });
  await page.close();
});

test("a service traced whole: its heap on the spans' timeline, each span with what it allocated", async (t) => {
  const example = path.resolve(path.dirname(tracekit), 'examples/service');
  if (!existsSync(example)) {
    t.skip(`no ${example} (cargo build --release -p tracekit-tracing --example service)`);
    return;
  }
  const [fxt, ctf] = ['service.fxt', 'service.ctf'].map((f) => path.join(scratch, f));
  execFileSync(example, [], {
    env: { ...process.env, TRACEKIT_FXT: fxt, MEMTRACE: ctf, MEMTRACE_RATE: '1' },
  });
  const url = await serveCommand(['-q', 'view', fxt, '--heap', ctf, '--heap-by-thread']);
  // The heap is a counter of the process whose peak is memtrace top's.
  const peak = JSON.parse(cli('memtrace', 'top', '--json', ctf)).peak.bytes;
  // The whole trace, every thread's track, as a range.
  let page = await open(url);
  const info = await page.evaluate(() =>
    fetch('/api/tracks', {
      headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
    }).then((r) => r.json()),
  );
  // And, by thread, each thread's own live heap: its domain's, as memtrace
  // timeline --domain draws it.
  // Every thread that ran a span names its heap (how many workers did depends
  // on the scheduler: on a busy machine one worker may run every task).
  const threads = info.tracks.filter((t) => t.kind === 'thread');
  const domains = threads.filter((t) => t.heap_domain !== null);
  assert.ok(domains.length >= 1 && domains.length === threads.length, 'every thread names its heap');
  const threadPeak = (d) =>
    JSON.parse(cli('memtrace', 'timeline', '--json', '--points', '10', '--domain', String(d), ctf)).peak.bytes;
  assert.deepEqual(
    info.counters.map((c) => [c.name, c.series, c.max]).sort(),
    [
      ['live heap', 'bytes', peak],
      ...domains.map((t) => [`live heap of ${t.name} [${t.tid}]`, 'bytes', threadPeak(t.heap_domain)]),
    ].sort(),
  );
  const tracks = (await page.evaluate(() => window.tracekitRows()))
    .filter((r) => r.kind === 'track' && !/async/.test(r.label))
    .map((r) => r.id);
  const span = await page.evaluate(() =>
    fetch('/api/tracks', {
      headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
    })
      .then((r) => r.json())
      .then((j) => j.span_ns),
  );
  await page.close();
  page = await open(`${url}#range=0,${span + 1},${tracks.join(',')}`);
  await page.waitForSelector('#selection-table');
  await settled(page);
  const shown = await page.$$eval('#selection-table tbody tr', (trs) =>
    Object.fromEntries(trs.map((r) => [r.cells[0].textContent, [+r.dataset.allocated, +r.dataset.selfAllocated]])),
  );
  const top = JSON.parse(cli('fxt', 'top', '--by', 'allocated', '--json', '--limit', '0', fxt)).names;
  const thread = top.filter((n) => n.kind === 'thread');
  assert.deepEqual(Object.keys(shown).sort(), thread.map((n) => n.name).sort());
  for (const n of thread) assert.deepEqual(shown[n.name], [n.allocated.bytes, n.allocated.self_bytes], n.name);
  // The example's figures: a request allocates 256 bytes itself, a parse 8000.
  const row = (name) => thread.find((n) => n.name === name);
  assert.equal(row('request').allocated.self_bytes, 12 * 256);
  assert.equal(row('parse').allocated.bytes, 12 * 8000);
  assert.equal(top[0].name, 'task');
  // The range's heap flame graph: what the heap trace allocated in the same
  // time, as memtrace top --between counts it.
  await page.waitForSelector('#heap-flame div');
  const heap = await page.evaluate(
    ([from, to, tracks]) =>
      fetch(`/api/heap-flame?from=${from}&to=${to}&tracks=${tracks}`, {
        headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
      }).then((r) => r.json()),
    [0, span + 1, tracks.join(',')],
  );
  // Of the selected threads: the domains their records name.
  const selected = tracks.map((i) => info.tracks[i].heap_domain).filter((d) => d !== null);
  assert.deepEqual(
    heap.domains,
    [...new Set(selected)].sort((a, b) => a - b),
  );
  const byDomain = heap.domains.flatMap((d) => ['--domain', String(d)]);
  const between = JSON.parse(
    cli('memtrace', 'top', '--json', '--between', `${heap.from_us}us`, `${heap.to_us}us`, ...byDomain, ctf),
  );
  assert.equal(heap.tree.total, between.totals.bytes);
  assert.equal(+(await page.getAttribute('#heap-flame', 'data-total')), heap.tree.total);
  // The clocks joined: everything the spans allocated is in the range's heap.
  const spans = thread.reduce((sum, n) => sum + n.allocated.self_bytes, 0);
  assert.ok(heap.tree.total >= spans, `${heap.tree.total} bytes in the range, ${spans} in its spans`);
  // Weighed by what was live in the range: memtrace's --live-between.
  await page.selectOption('#heap-weigh', 'live');
  await page.waitForSelector('#heap-flame[data-weigh="live"]');
  const live = JSON.parse(
    cli('memtrace', 'top', '--json', '--live-between', `${heap.from_us}us`, `${heap.to_us}us`, ...byDomain, ctf),
  );
  assert.equal(+(await page.getAttribute('#heap-flame', 'data-total')), live.totals.bytes);
  assert.ok(live.totals.bytes >= heap.tree.total, 'what was allocated in the range was live in it');
  assert.match(await page.textContent('#heap-flame ~ h2, h2:has(+ p + #heap-flame)'), /live in it/);
  await page.screenshot({ path: path.join(shots, 'timeline-service-allocations.png'), fullPage: true });
  await page.close();
});

test('a service watched while it runs: its spans and its heap grow in the page, then stay', async (t) => {
  const example = path.resolve(path.dirname(tracekit), 'examples/service');
  if (!existsSync(example)) {
    t.skip(`no ${example} (cargo build --release -p tracekit-tracing --example service)`);
    return;
  }
  const [fxt, ctf] = ['live-service.fxt', 'live-service.ctf'].map((f) => path.join(scratch, f));
  // Each task a second between requests: four seconds of writing,
  // flushed every 50 ms.
  const service = spawn(example, [], {
    stdio: 'ignore',
    env: {
      ...process.env,
      TRACEKIT_FXT: fxt,
      TRACEKIT_FXT_FLUSH_MS: '50',
      MEMTRACE: ctf,
      MEMTRACE_RATE: '1',
      MEMTRACE_FLUSH_MS: '50',
      SERVICE_PACE_MS: '1000',
    },
  });
  const done = new Promise((resolve) => service.on('exit', resolve));
  const [spansUrl, heapUrl] = await Promise.all([
    serveCommand(['-q', 'view', '--follow', fxt]),
    serveCommand(['-q', 'view', '--follow', ctf]),
  ]);
  const spans = await open(spansUrl);
  const heap = await openPage(heapUrl);
  // While it runs: the title says so, and the slices shown grow.
  const counts = [];
  const title = async () => spans.$eval('#title', (e) => [e.textContent, e.dataset.followed]);
  let [text, followed] = await title();
  assert.match(text, /following, still written/);
  assert.equal(followed, 'writing');
  await spans.screenshot({ path: path.join(shots, 'timeline-followed-while-written.png') });
  while (followed === 'writing') {
    counts.push(+/· (\d+) slices/.exec(text)[1]);
    await new Promise((r) => setTimeout(r, 100));
    [text, followed] = await title();
  }
  assert.equal(await done, 0);
  assert.equal(followed, 'ended');
  assert.match(text, /followed to its end/);
  const last = +/· (\d+) slices/.exec(text)[1];
  assert.ok(
    counts.some((c) => c < last),
    `the page grew while the service ran: ${counts.join(', ')} then ${last}`,
  );
  // The page ends as a fresh view of the finished file shows it.
  const fresh = await open(await serve(fxt));
  const freshTitle = await fresh.$eval('#title', (e) => e.textContent);
  assert.equal(text.replace(' · followed to its end', ''), freshTitle);
  await settled(spans);
  await spans.screenshot({ path: path.join(shots, 'timeline-followed-to-its-end.png') });
  const rows = async (page) =>
    (await page.evaluate(() => window.tracekitRows())).map((r) => [r.kind, r.label, r.lanes]);
  assert.deepEqual(await rows(spans), await rows(fresh));
  // The heap's page: its info is `memtrace info`'s of the finished trace.
  await heap.waitForFunction(() => document.getElementById('title').dataset.followed === 'ended');
  await settled(heap);
  const info = JSON.parse(cli('memtrace', 'info', '--json', ctf));
  const events = await heap.$$eval('#info dt', (dts) => {
    const dt = dts.find((d) => d.textContent === 'events');
    return +dt.nextElementSibling.textContent;
  });
  assert.equal(events, info.events);
  assert.ok(info.allocs > 0);
  await heap.screenshot({ path: path.join(shots, 'view-followed-to-its-end.png'), fullPage: true });
  for (const p of [spans, heap, fresh]) await p.close();
});

// FXT records, little-endian words: enough of the format for a test to write
// threads that come while a trace is followed.
function fxtWords(words) {
  const b = Buffer.alloc(words.length * 8);
  words.forEach((w, i) => b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(w)), i * 8));
  return b;
}
const fxtStart = () =>
  Buffer.concat([fxtWords([0x0016547846040010n, 1n | (2n << 4n), 1_000_000_000n]), fxtString(1, 'c')]);
function fxtString(index, text) {
  const bytes = Buffer.from(text);
  const words = Math.ceil(bytes.length / 8);
  const header = 2n | (BigInt(1 + words) << 4n) | (BigInt(index) << 16n) | (BigInt(bytes.length) << 32n);
  return Buffer.concat([fxtWords([header]), bytes, Buffer.alloc(words * 8 - bytes.length)]);
}
// Thread slot `slot` as pid/tid, and a complete slice named by string 2 on it
// per [start, end].
function fxtThread(slot, pid, tid, name, slices) {
  const thread = fxtWords([3n | (3n << 4n) | (BigInt(slot) << 16n), BigInt(pid), BigInt(tid)]);
  const events = slices.map(([start, end]) =>
    fxtWords([4n | (3n << 4n) | (4n << 16n) | (BigInt(slot) << 24n) | (1n << 32n) | (2n << 48n), start, end]),
  );
  return Buffer.concat([fxtString(2, name), thread, ...events]);
}

test('a followed trace whose new thread sorts first: the pin stays on its track', async () => {
  const file = path.join(scratch, 'renumbered.fxt');
  writeFileSync(file, fxtStart());
  // Held open for writing, as a program writing it does: the view follows it.
  const fd = openSync(file, 'a');
  writeSync(fd, fxtThread(1, 100, 20, 'late', [[1000, 5000]]));
  const url = await serveCommand(['-q', 'view', '--follow', file]);
  const page = await open(`${url}#pin=0`);
  const pinned = async () =>
    (await page.evaluate(() => window.tracekitRows())).filter((r) => r.pinned).map((r) => r.label);
  // Threads without a name record are named by their id.
  assert.deepEqual(await pinned(), ['thread [20] · process [100]']);
  // A thread of a lower id comes: it sorts first, and the pinned one is
  // track 1 now.
  writeSync(fd, fxtThread(2, 100, 10, 'early', [[2000, 3000]]));
  await page.waitForFunction(() => /· 2 slices on 2 tracks/.test(document.getElementById('title').textContent));
  await settled(page);
  assert.deepEqual(await pinned(), ['thread [20] · process [100]']);
  // And the URL says so, once the view rests.
  await page.waitForFunction(() => /[#&]pin=1(&|$)/.test(location.hash));
  closeSync(fd);
  await page.close();
});

test("the tracing layer's async example: its worker threads", async () => {
  const example = path.resolve(path.dirname(tracekit), 'examples/tasks');
  if (!existsSync(example)) {
    console.log(`# skipped: no ${example} (cargo build --release -p tracekit-tracing --example tasks)`);
    return;
  }
  const fxt = path.join(scratch, 'tasks.fxt');
  execFileSync(example, [], { env: { ...process.env, TRACEKIT_FXT: fxt } });
  const page = await open(await serve(fxt));
  await assertTracks(page, fxt);
  const slices = dumpSlices(fxt);
  const handles = slices.filter((s) => s.name.toLowerCase().includes('parse')).length;
  await page.fill('#search', 'parse');
  await page.press('#search', 'Enter');
  await page.waitForFunction(() => document.getElementById('search-count').dataset.matches !== undefined);
  assert.equal(+(await page.getAttribute('#search-count', 'data-matches')), handles);
  await settled(page);
  // Each task is a track of its own, named by its span and the span's fields,
  // holding its async slices and those of the spans it polls: a slice's task
  // is found from fxt dump's async begins by following `within` (else
  // `parent`) while it names another async slice. Ids are kept as text: they
  // pass 2^53.
  const begun = new Map();
  for (const line of cli('fxt', 'dump', fxt).split('\n')) {
    const m = / async_begin .* async_id=(\d+) .* name="([^"]*)"(?: args=(.*))?$/.exec(line);
    if (!m) continue;
    const [, id, name, args = ''] = m;
    const arg = (k) => new RegExp(`"${k}": (\\d+)`).exec(args)?.[1];
    const fields = [...args.matchAll(/"(\w+)": ("[^"]*"|[-\d.]+|true|false)/g)]
      .filter(([, k]) => !['level', 'parent', 'within', 'allocated_bytes', 'allocations'].includes(k))
      .map(([, k, v]) => `${k}=${v.replace(/^"|"$/g, '')}`)
      .sort()
      .slice(0, 2);
    begun.set(id, { name, link: arg('within') ?? arg('parent'), label: `${name} ${fields.join(' ') || '#' + id}` });
  }
  const taskOf = (id) => {
    while (begun.get(id).link !== undefined && begun.has(begun.get(id).link)) id = begun.get(id).link;
    return begun.get(id).label;
  };
  const perTask = {};
  for (const id of begun.keys()) perTask[taskOf(id)] = (perTask[taskOf(id)] ?? 0) + 1;
  const api = await page.evaluate(() =>
    fetch('/api/tracks', {
      headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
    }).then((r) => r.json()),
  );
  const asyncTracks = api.tracks.filter((t) => t.kind === 'async');
  assert.deepEqual(Object.fromEntries(asyncTracks.map((t) => [t.name, t.slices])), perTask);
  assert.ok(
    asyncTracks.every((t) => /^handler worker=\d$/.test(t.name)),
    'every request and lookup runs within a handler',
  );
  const rows = await page.evaluate(() => window.tracekitRows());
  const tasks = rows.filter((r) => r.kind === 'track' && / \(async\) · /.test(r.label));
  assert.deepEqual(tasks.map((r) => r.label.split(' (async)')[0]).sort(), Object.keys(perTask).sort());
  const top = JSON.parse(cli('fxt', 'top', '--json', '--limit', '0', fxt)).names.filter((n) => n.kind === 'async');
  const byName = {};
  for (const { name } of begun.values()) byName[name] = (byName[name] ?? 0) + 1;
  for (const n of top) assert.equal(n.count, byName[n.name], n.name);
  await page.screenshot({ path: path.join(shots, 'timeline-tracing-tasks.png') });
  // A job followed to the task it runs under: a lookup's details link to the
  // request whose span is its parent (the `parent` of its async begin). The
  // lookups lie deepest on their handler's track.
  const deepest = asyncTracks.reduce((a, b) => (b.lanes > a.lanes ? b : a));
  const url = page.url().split('#')[0];
  await page.close();
  const followed = await open(`${url}#slice=${deepest.id},${deepest.lanes - 1},0`);
  await followed.waitForSelector('#details-table [data-parent]');
  const asked = await followed.evaluate(() => {
    const d = document.getElementById('details');
    return d.dataset.slice;
  });
  const [lt, ll, li] = asked.split(',').map(Number);
  const lookup = await followed.evaluate(
    ([track, lane, index]) =>
      fetch(`/api/details?track=${track}&lane=${lane}&index=${index}`, {
        headers: { Authorization: 'Bearer ' + new URLSearchParams(location.search).get('token') },
      }).then((r) => r.json()),
    [lt, ll, li],
  );
  assert.equal(lookup.name, 'lookup');
  await followed.click('#details-table [data-parent]');
  await followed.waitForFunction((was) => document.getElementById('details').dataset.slice !== was, asked);
  const parent = await details(followed);
  assert.equal(parent.Name, 'request');
  // The same request: its id is the lookup's.
  assert.equal(parent.id, String(lookup.args.id));
  // And the request to the handler task that polled it when it moved
  // threads, the span it ran within.
  const request = await followed.evaluate(() => document.getElementById('details').dataset.slice);
  await followed.waitForSelector('#details-table [data-within]');
  await followed.click('#details-table [data-within]');
  await followed.waitForFunction((was) => document.getElementById('details').dataset.slice !== was, request);
  const task = await details(followed);
  assert.equal(task.Name, 'handler');
  assert.ok(['0', '1', '2', '3'].includes(task.worker), task.worker);
  // All three on the handler's own track.
  const on = await followed.evaluate(() => document.getElementById('details').dataset.slice);
  assert.deepEqual([lt, +request.split(',')[0], +on.split(',')[0]], [deepest.id, deepest.id, deepest.id]);
  await followed.close();
});

test('a perf recording of a threaded C program: its threads', async () => {
  const dir = path.join(scratch, 'perf');
  mkdirSync(dir, { recursive: true });
  const src = path.join(dir, 'threads.c');
  // The perf recording tests' program: two named workers and the main thread.
  writeFileSync(src, readFileSync(path.join(root, 'crates/tracekit/tests/integration/threads.c')));
  const exe = path.join(dir, 'threads');
  const cc = spawnSync('cc', ['-O0', '-g', '-fno-omit-frame-pointer', '-pthread', '-o', exe, src]);
  const rec = cc.status === 0 && spawnSync(tracekit, ['-q', 'perf', 'record', '-o', dir, '--', exe]);
  if (!rec || rec.status !== 0 || !existsSync(path.join(dir, 'perf.data'))) {
    console.log(`# skipped: cannot record with perf here: ${rec ? rec.stderr : cc.stderr}`);
    return;
  }
  // The perf.data itself: decoded to a timeline in memory by the viewer.
  const page = await open(await serve(path.join(dir, 'perf.data')));
  await assertTracks(page, path.join(dir, 'trace.fxt'));
  const labels = (await page.evaluate(() => window.tracekitRows())).map((r) => r.label).join('\n');
  assert.match(labels, /worker-0/);
  assert.match(labels, /worker-1/);
  await page.screenshot({ path: path.join(shots, 'timeline-perf-threads.png') });
  await page.close();
});
