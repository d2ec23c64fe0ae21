// `tracekit memtrace view` in a real browser (Debian's chromium, driven by
// playwright-core): the page's figures against the CLI's, the graph's drag,
// the filter, the flame graph's zoom, a reload. Screenshots of each view go
// to target/view-screenshots/.
//
//   TRACEKIT=target/release/tracekit CORPUS=../shared/corpus node --test view.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { blank, corpus, open, root, scratch, serve as serveCommand, settled, shots, tracekit } from './harness.mjs';

const trace = path.join(corpus, 'memtrace/traces/synth_v2.ctf');
const other = path.join(corpus, 'memtrace/traces/lists_hashtbl_v2.ctf');

function serve(args) {
  return serveCommand(['memtrace', 'view', ...args]);
}

function cli(...args) {
  return JSON.parse(execFileSync(tracekit, ['memtrace', ...args], { maxBuffer: 1 << 28 }).toString());
}

// The top table's rows are the sites of a `top --json` answer, in its order,
// with its allocation counts.
function assertTopRows(rows, top) {
  assert.deepEqual(
    rows.map((r) => [r[0], r[2]]),
    top.sites.map((s) => [s.site, String(s.allocs)]),
  );
}

async function topRows(page) {
  return page.$$eval('#top-table tbody tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
}

test('the top table is what top --json ranks', async () => {
  const page = await open(await serve([trace]));
  const rows = await topRows(page);
  const expected = cli('top', '--json', '--limit', '100', trace);
  assertTopRows(rows, expected);
  const info = await page.textContent('#info');
  assert.match(info, /0\.001 \(1\/8000 bytes\)/);
  assert.match(info, /corpus-host/);
  await page.screenshot({ path: path.join(shots, 'top.png'), fullPage: true });
  // A size range: the table follows top --min-size --max-size.
  await page.fill('#f-minsize', '64');
  await page.fill('#f-maxsize', '4k');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('maxsize='));
  await settled(page);
  const sized = cli('top', '--json', '--limit', '100', '--min-size', '64', '--max-size', '4k', trace);
  const sizedRows = await topRows(page);
  assertTopRows(sizedRows, sized);
  assert.notDeepEqual(
    sizedRows.map((r) => r[2]),
    rows.map((r) => r[2]),
  );
  // A clause on the objects' lives: never collected, lived 1 s or more.
  await page.check('#f-never');
  await page.fill('#f-lfrom', '1s');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('never='));
  await settled(page);
  const lives = cli(
    'top',
    '--json',
    '--limit',
    '100',
    '--never-collected',
    '--lifetime',
    '1s',
    '140.020177s',
    '--min-size',
    '64',
    '--max-size',
    '4k',
    trace,
  );
  const livesRows = await topRows(page);
  assertTopRows(livesRows, lives);
  assert.notDeepEqual(
    livesRows.map((r) => r[2]),
    sizedRows.map((r) => r[2]),
  );
  await page.close();
});

test('a range dragged on the memory graph filters the table as top --between', async () => {
  const page = await open(await serve([trace]));
  const box = await page.locator('#graph').boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction(() => location.hash.includes('from='));
  await settled(page);
  const hash = new URLSearchParams(await page.evaluate(() => location.hash.slice(1)));
  const expected = cli('top', '--json', '--limit', '100', '--between', hash.get('from'), hash.get('to'), trace);
  const rows = await topRows(page);
  assert.ok(rows.length > 0);
  assertTopRows(rows, expected);
  const whole = cli('top', '--json', '--limit', '100', trace);
  assert.notDeepEqual(
    rows.map((r) => r[2]),
    whole.sites.map((s) => String(s.allocs)),
  );
  // The dragged range is shaded; a collected range is shaded too, apart.
  assert.equal(await page.locator('#graph rect.range').count(), 1);
  await page.fill('#f-cfrom', '1s');
  await page.fill('#f-cto', '100s');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('cfrom='));
  await settled(page);
  assert.equal(await page.locator('#graph rect.range.collected').count(), 1);
  assert.equal(await page.locator('#graph rect.range').count(), 2);
  await page.screenshot({ path: path.join(shots, 'graph-range.png'), fullPage: true });
  await page.close();
});

test('a click on the memory graph shows the flame graph of what is live then, as flamegraph --at', async () => {
  const page = await open(await serve([trace]));
  const box = await page.locator('#graph').boundingBox();
  await page.mouse.click(box.x + box.width * 0.5, box.y + box.height / 2);
  await page.waitForFunction(() => location.hash.includes('at='));
  await settled(page);
  const hash = new URLSearchParams(await page.evaluate(() => location.hash.slice(1)));
  assert.equal(hash.get('live'), 'at');
  assert.equal(await page.getAttribute('button[data-tab="flame"]', 'aria-selected'), 'true');
  const total = Number(await page.getAttribute('#flame-total', 'data-total'));
  const expected = cli('flamegraph', '--json', '--at', hash.get('at'), trace);
  assert.equal(total, expected.total);
  assert.ok(total > 0);
  assert.notEqual(total, cli('flamegraph', '--json', trace).total);
  await page.screenshot({ path: path.join(shots, 'flame-live-at.png'), fullPage: true });
  await page.close();
});

test('a required function filters the flame graph as flamegraph --location; a click zooms; a reload keeps the view', async () => {
  const url = await serve([trace]);
  const page = await open(url);
  await page.click('button[data-tab="flame"]');
  await settled(page);
  await page.fill('#f-location', 'Module_012');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('location='));
  await settled(page);
  const total = Number(await page.getAttribute('#flame-total', 'data-total'));
  const expected = cli('flamegraph', '--json', '--location', 'Module_012', trace);
  assert.equal(total, expected.total);
  const unfiltered = cli('flamegraph', '--json', trace);
  assert.ok(total < unfiltered.total);
  await page.screenshot({ path: path.join(shots, 'flame.png'), fullPage: true });
  // Zoom: click the widest frame below the root.
  const frames = page.locator('#flame div');
  const before = await frames.count();
  const widest = await page.$$eval('#flame div', (ds) => {
    let best = 1;
    for (let i = 1; i < ds.length; i++)
      if (
        parseFloat(ds[i].style.width) > parseFloat(ds[best].style.width) &&
        parseFloat(ds[i].style.width) < parseFloat(ds[0].style.width)
      )
        best = i;
    return best;
  });
  const name = await frames.nth(widest).textContent();
  await frames.nth(widest).click();
  await page.waitForFunction(() => location.hash.includes('zoom='));
  // The URL changes before the graph is redrawn: wait for the redraw, not the URL.
  await page
    .waitForFunction((n) => document.querySelector('#crumbs').textContent.endsWith(n), name, { timeout: 5000 })
    .catch(() => {});
  const crumbs = await page.textContent('#crumbs');
  assert.ok(crumbs.endsWith(name), `${crumbs} ends with ${name}`);
  assert.equal(await page.$eval('#flame div', (d) => d.textContent), name);
  assert.notEqual(await frames.count(), before);
  await page.screenshot({ path: path.join(shots, 'flame-zoomed.png'), fullPage: true });
  // The URL holds the view.
  const zoomedUrl = page.url();
  await page.close();
  const again = await open(zoomedUrl);
  assert.equal(await again.inputValue('#f-location'), 'Module_012');
  assert.equal(await again.textContent('#crumbs'), crumbs);
  assert.equal(await again.getAttribute('button[data-tab="flame"]', 'aria-selected'), 'true');
  await again.close();
});

test('recursion deeper than a screen is folded, and the toggle keeps it or folds it always', async () => {
  // Stacks of the sample trace are over a thousand frames deep unfolded.
  const deepest = (f) => Math.max(...f.stacks.map((s) => s.frames.length));
  assert.ok(deepest(cli('flamegraph', '--json', '--no-collapse-recursion', trace)) > 60);
  assert.ok(deepest(cli('flamegraph', '--json', trace)) <= 60);
  const page = await open(await serve([trace]));
  await page.click('button[data-tab="flame"]');
  await settled(page);
  assert.match(await page.textContent('#recursion option[value="auto"]'), /\(folded\)/);
  const total = await page.getAttribute('#flame-total', 'data-total');
  await page.selectOption('#recursion', 'keep');
  await page.waitForFunction(() => location.hash.includes('recursion=keep'));
  await page.waitForFunction(
    () => !document.querySelector('#recursion option[value="auto"]').textContent.includes('folded'),
  );
  // The same weight, drawn unfolded.
  assert.equal(await page.getAttribute('#flame-total', 'data-total'), total);
  const kept = page.url();
  await page.close();
  const again = await open(kept);
  await again.click('button[data-tab="flame"]');
  await settled(again);
  assert.equal(await again.inputValue('#recursion'), 'keep');
  await again.close();
});

test('function clauses filter as --function and --forbid-function', async () => {
  const page = await open(await serve([trace]));
  await page.click('button[data-tab="flame"]');
  await settled(page);
  await page.selectOption('#c-kind', 'forbid');
  await page.selectOption('#c-match', 'function');
  await page.fill('#c-text', 'Module_033.func_35');
  await page.click('#c-add');
  await page.selectOption('#c-kind', 'require');
  await page.selectOption('#c-match', 'contains');
  await page.fill('#c-text', 'module_0');
  await page.click('#c-add');
  assert.equal(await page.locator('#clauses .chip').count(), 2);
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('clauses='));
  await settled(page);
  const total = Number(await page.getAttribute('#flame-total', 'data-total'));
  const expected = cli(
    'flamegraph',
    '--json',
    '--forbid-function',
    'Module_033.func_35',
    '--location',
    'module_0',
    trace,
  );
  assert.equal(total, expected.total);
  assert.ok(total > 0 && total < cli('flamegraph', '--json', '--location', 'module_0', trace).total);
  // Hiding a frame changes the stacks drawn, not the total.
  const before = await page.$$eval('#flame div', (ds) => ds.map((d) => d.textContent));
  assert.ok(before.includes('Module_048.func_11'));
  await page.selectOption('#c-kind', 'hide');
  await page.fill('#c-text', 'Module_048.func_11');
  await page.click('#c-add');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('hide'));
  await settled(page);
  assert.equal(Number(await page.getAttribute('#flame-total', 'data-total')), total);
  const drawn = await page.$$eval('#flame div', (ds) => ds.map((d) => d.textContent));
  assert.ok(!drawn.includes('Module_048.func_11'));
  const hidden = cli(
    'flamegraph',
    '--json',
    '--forbid-function',
    'Module_033.func_35',
    '--location',
    'module_0',
    '--hide',
    'Module_048.func_11',
    trace,
  );
  assert.ok(hidden.stacks.every((s) => !s.frames.includes('Module_048.func_11')));
  await page.screenshot({ path: path.join(shots, 'clauses.png'), fullPage: false });
  await page.close();
});

test('functions weigh the stacks they appear in', async () => {
  const page = await open(await serve([trace]));
  await page.click('button[data-tab="functions"]');
  await settled(page);
  const shown = await page.$$eval('#functions-table tbody tr', (rows) =>
    rows.map((r) => [r.cells[0].textContent, Number(r.cells[1].dataset.weight)]),
  );
  // Each function's stacks, from the CLI's folded stacks.
  const f = cli('flamegraph', '--json', trace);
  const weight = new Map();
  for (const s of f.stacks) for (const name of new Set(s.frames)) weight.set(name, (weight.get(name) ?? 0) + s.weight);
  assert.ok(shown.length > 10);
  for (const [name, w] of shown) assert.equal(w, weight.get(name), name);
  const heaviest = Math.max(...weight.values());
  assert.equal(shown[0][1], heaviest);
  await page.screenshot({ path: path.join(shots, 'functions.png'), fullPage: false });
  await page.close();
});

test('growing ranks as top --growing, each site with its live bytes over time', async () => {
  const grows = path.join(scratch, 'grows.ctf');
  execFileSync(tracekit, ['memtrace', 'sample', '-q', '-o', grows, '--allocs', '100000']);
  const page = await open(await serve([grows]));
  await page.click('button[data-tab="growing"]');
  await settled(page);
  const shown = await page.$$eval('#growing-table tbody tr', (rows) =>
    rows.map((r) => ({
      site: r.cells[4].textContent,
      steadiness: r.cells[1].textContent,
      times: r.querySelector('svg.spark title').textContent.split('\n').length,
      points: r.querySelector('svg.spark polyline').getAttribute('points').split(' ').length,
    })),
  );
  const expected = cli('top', '--growing', '--json', '--limit', '100', grows).growing;
  assert.ok(expected.sites.length > 10, 'the sample trace has sites that grow');
  assert.deepEqual(
    shown.map((r) => [r.site, r.steadiness]),
    expected.sites.map((s) => [s.site, s.steadiness.toFixed(2)]),
  );
  for (const r of shown) assert.deepEqual([r.times, r.points], [expected.times_s.length, expected.times_s.length]);
  await page.screenshot({ path: path.join(shots, 'growing.png'), fullPage: false });
  await page.close();
});

test('callee and caller tables expand; compare shows diff', async () => {
  const page = await open(await serve([trace, '--compare', other]));
  for (const [tab, table] of [
    ['callees', '#callee-table'],
    ['callers', '#caller-table'],
  ]) {
    await page.click(`button[data-tab="${tab}"]`);
    await settled(page);
    const rows = page.locator(`${table} tbody tr`);
    const n = await rows.count();
    assert.ok(n > 0);
    await rows.first().click();
    await page.waitForFunction(([sel, k]) => document.querySelectorAll(sel).length > k, [`${table} tbody tr`, n]);
    assert.ok((await rows.count()) > n, `${tab}: a click expands`);
    // The count column: the sampled objects of the rows' stacks, which together
    // are every allocation of the trace but those without a backtrace.
    const counts = await page.$$eval(`${table} tbody tr`, (rs) =>
      rs.filter((r) => !r.cells[0].textContent.startsWith('  ')).map((r) => Number(r.cells[2].textContent)),
    );
    const top = cli('top', '--json', trace);
    const sum = counts.reduce((a, b) => a + b, 0);
    assert.equal(sum, top.events.allocs - top.events.filtered_allocs, `${tab}: counts`);
    // Sorting by count orders the first level by it. The table is drawn
    // anew, its sorted column marked (already marked on the second table,
    // as the sort is kept: what tells the new table is that it is new).
    await page.$eval(table, (t) => (t.dataset.drawn = 'before the sort'));
    await page.click(`${table} th[data-sort="objects"]`);
    await page.waitForFunction((sel) => {
      const t = document.querySelector(sel);
      return t && !t.dataset.drawn && t.querySelector('th[data-sort="objects"]').textContent.endsWith('▾');
    }, table);
    await settled(page);
    const sorted = await page.$$eval(`${table} tbody tr`, (rs) => rs.map((r) => Number(r.cells[2].textContent)));
    assert.deepEqual(
      sorted,
      [...sorted].sort((a, b) => b - a),
      `${tab}: sorted by count`,
    );
    await page.screenshot({ path: path.join(shots, `${tab}.png`), fullPage: false });
  }
  // Keyboard: down twice, Enter focuses the flame graph on that call path.
  await page.click('button[data-tab="callees"]');
  await settled(page);
  await page.focus('#callee-table');
  const before = await page.locator('#callee-table tbody tr').count();
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction((k) => document.querySelectorAll('#callee-table tbody tr').length > k, before);
  await page.keyboard.press('ArrowDown');
  const chosen = await page.$eval('#callee-table tr.selected td', (td) => td.textContent.trim().replace(/^[▸▾ ]+/, ''));
  await page.keyboard.press('Enter');
  await page.waitForSelector('#fragment-bar');
  await settled(page);
  assert.ok((await page.$eval('#fragment-bar', (d) => d.textContent)).startsWith(chosen + ' — '));
  await page.click('button[data-tab="compare"]');
  await settled(page);
  const names = await page.$$eval('#compare-table tbody tr', (rows) => rows.map((r) => r.cells[0].textContent));
  const expected = cli('diff', '--json', '--limit', '100', other, trace);
  assert.deepEqual(
    names,
    expected.sites.map((s) => s.site),
  );
  await page.screenshot({ path: path.join(shots, 'compare.png'), fullPage: true });
  await page.close();
});

// One program in three versions (tracekit-alloc-demo's `versions`), traced
// counting every byte: `grown` changes one function, `moved` moves one
// function's allocation to other lines.
function versions() {
  const program = path.join(root, 'target/release/versions');
  const traces = {};
  for (const v of ['base', 'grown', 'moved']) {
    traces[v] = path.join(scratch, `version-${v}.ctf`);
    execFileSync(program, [v], { env: { ...process.env, MEMTRACE: traces[v], MEMTRACE_RATE: '1' } });
  }
  return traces;
}

// The diff tab's boxes: name, A's and B's weights, depth from the top.
async function diffBoxes(page) {
  return page.$$eval('#flame div[data-name]', (boxes) =>
    boxes.map((b) => ({
      name: b.dataset.name,
      a: Number(b.dataset.a),
      b: Number(b.dataset.b),
      colour: b.style.background,
    })),
  );
}

test('the diff flame graph weighs each function as diff --by function and flamegraph --diff do', async () => {
  const v = versions();
  const page = await open(await serve([v.grown, '--compare', v.base]));
  assert.equal(await page.isVisible('button[data-tab="diff"]'), true);
  await page.click('button[data-tab="diff"]');
  await settled(page);
  const boxes = await diffBoxes(page);
  // Every allocation is made under one function of the program's, called
  // from main alone: its box weighs what diff --by function says it allocated.
  const sites = cli('diff', '--by', 'function', '--json', '--limit', '0', v.base, v.grown).sites;
  const mains = sites.filter((s) => s.site.startsWith('versions::') && s.site !== 'versions::main');
  assert.deepEqual(mains.map((s) => s.site).sort(), [
    'versions::index_keys',
    'versions::parse_records',
    'versions::render_pages',
  ]);
  for (const s of mains) {
    const box = boxes.find((b) => b.name === s.site);
    assert.ok(box, s.site);
    assert.deepEqual([box.a, box.b], [s.allocated_bytes_a, s.allocated_bytes_b], s.site);
  }
  const grew = boxes.find((b) => b.name === 'versions::parse_records');
  assert.ok(grew.b > grew.a, 'parse_records grew');
  assert.match(grew.colour, /^rgb\(255, /, 'drawn red');
  const same = boxes.find((b) => b.name === 'versions::index_keys');
  assert.equal(same.colour, 'rgb(250, 250, 250)', 'no change: pale');
  // The functions table below is flamegraph --diff --json's, in its order.
  const rows = await page.$$eval('#diff-functions tbody tr', (rs) => rs.map((r) => r.cells[0].textContent));
  const cliDiff = cli('flamegraph', '--diff', v.base, '--json', v.grown);
  assert.deepEqual(
    rows,
    cliDiff.functions.slice(0, rows.length).map((f) => f.name),
  );
  assert.equal(cliDiff.functions.find((f) => f.name === 'versions::parse_records').total, grew.b);
  await page.screenshot({ path: path.join(shots, 'diff.png'), fullPage: true });
  // A click zooms into the frame; the graph is then of it alone.
  await page.click('#flame div[data-name="versions::parse_records"]');
  await page.waitForFunction(() => document.querySelector('#crumbs')?.textContent.includes('parse_records'));
  await settled(page);
  const zoomed = await diffBoxes(page);
  assert.ok(zoomed.every((b) => b.name !== 'versions::render_pages'));
  await page.screenshot({ path: path.join(shots, 'diff-zoomed.png'), fullPage: true });
  // The compared trace's live heap is drawn over this one's.
  assert.equal(await page.locator('#graph path.base').count(), 1);
  await page.close();
});

test('moved lines change nothing by function, and everything by line', async () => {
  const v = versions();
  const page = await open(await serve([v.moved, '--compare', v.base]));
  await page.click('button[data-tab="diff"]');
  await settled(page);
  const render = (await diffBoxes(page)).find((b) => b.name === 'versions::render_pages');
  assert.ok(render.a > 0);
  assert.equal(render.a, render.b, 'render_pages allocated the same');
  await page.click('button[data-tab="compare"]');
  await settled(page);
  const byLine = await page.$$eval('#compare-table tbody tr', (rs) => rs.map((r) => r.cells[0].textContent));
  assert.ok(byLine.filter((n) => n.startsWith('versions::render_pages@')).length === 2, 'two lines, one up, one down');
  await page.selectOption('#compare-by', 'function');
  await page.waitForFunction(() => location.hash.includes('cby=function'));
  await settled(page);
  const byFunction = await page.$$eval('#compare-table tbody tr', (rs) => rs.map((r) => r.cells[3].textContent));
  const expected = cli('diff', '--by', 'function', '--json', '--limit', '100', v.base, v.moved);
  assert.equal(expected.no_difference, true);
  assert.equal(byFunction.length, expected.sites.length);
  await page.screenshot({ path: path.join(shots, 'compare-moved.png'), fullPage: true });
  // Weighed by what is live at each trace's peak, the table ranks as diff --peak.
  await page.selectOption('#f-live', 'peak');
  await page.click('#apply');
  await page.waitForFunction(() => location.hash.includes('live=peak'));
  await settled(page);
  const atPeak = await page.$$eval('#compare-table tbody tr', (rs) =>
    rs.map((r) => [...r.cells].map((c) => c.textContent)),
  );
  const peak = cli('diff', '--by', 'function', '--peak', '--json', '--limit', '100', v.base, v.moved);
  assert.equal(peak.ranked_by, 'live_at');
  assert.deepEqual(
    atPeak.map((r) => r[0]),
    peak.sites.map((s) => s.site),
  );
  assert.ok((await page.textContent('#compare-table thead')).includes('live at'));
  await page.close();
});

test('two allocation ranges of one trace: the diff flame graph weighs each as flamegraph --between does', async () => {
  const page = await open(await serve([trace]));
  await page.click('button[data-tab="diff"]');
  await settled(page);
  // No range chosen yet: nothing to keep as the baseline.
  assert.equal(await page.isDisabled('[data-baseline-set]'), true);
  // The trace allocates most in its first two seconds: the first against the second.
  await page.evaluate(() => (location.hash = '#from=0s&to=1s&tab=diff'));
  await page.waitForFunction(() => !document.querySelector('[data-baseline-set]')?.disabled);
  await page.click('[data-baseline-set]');
  await page.waitForFunction(() => location.hash.includes('bfrom=0s'));
  await page.waitForSelector('[data-baseline-clear]');
  // Another range against it.
  await page.evaluate(() => (location.hash = '#from=1s&to=2s&tab=diff&bfrom=0s&bto=1s'));
  await page.waitForFunction(() => document.querySelector('#crumbs') && location.hash.includes('from=1s'));
  await settled(page);
  const total = (from, to) => cli('flamegraph', '--json', '--between', from, to, trace).total;
  const root = await page.$eval('#flame div[data-name="all"]', (b) => [+b.dataset.a, +b.dataset.b]);
  assert.deepEqual(root, [total('0s', '1s'), total('1s', '2s')]);
  assert.ok(root[0] > 0 && root[1] > root[0]);
  assert.ok((await page.$$('#flame div[data-name]')).length > 10, 'the frames of both ranges are drawn');
  assert.match(await page.textContent('#baseline'), /allocations between 0s and 1s/);
  await page.screenshot({ path: path.join(shots, 'diff-ranges.png'), fullPage: false });
  await page.close();
});

/// The weight of the stacks that hold `fragment` as consecutive frames.
function through(stacks, fragment) {
  let w = 0;
  for (const s of stacks) {
    const f = s.frames;
    for (let i = 0; i + fragment.length <= f.length; i++) {
      if (fragment.every((x, j) => f[i + j] === x)) {
        w += s.weight;
        break;
      }
    }
  }
  return w;
}

test("hot paths are the CLI's, and the focus extends toward callers and retracts", async () => {
  const page = await open(await serve([trace]));
  await page.click('button[data-tab="functions"]');
  await settled(page);
  await page.waitForSelector('#hot-paths-table tbody tr');
  const shown = await page.$$eval('#hot-paths-table tbody tr', (rows) => rows.map((r) => r.cells[0].textContent));
  const hot = cli('hot-paths', '--json', trace);
  assert.deepEqual(
    shown,
    hot.paths.map((p) => p.frames.join(' › ') + (p.cut ? ' …' : '')),
  );
  await page.screenshot({ path: path.join(shots, 'hot-paths.png'), fullPage: false });
  // Focus on the heaviest path of one frame that has callers.
  const stacks = cli('flamegraph', '--json', trace).stacks;
  const i = hot.paths.findIndex((p) => p.frames.length === 1 && stacks.some((s) => s.frames.indexOf(p.frames[0]) > 0));
  assert.ok(i >= 0);
  const fragment = hot.paths[i].frames;
  await page.locator('#hot-paths-table tbody tr').nth(i).dblclick();
  await page.waitForSelector('#fragment-bar');
  await settled(page);
  const shownWeight = () => page.$eval('#flame-total', (e) => Number(e.dataset.shown));
  assert.equal(await shownWeight(), hot.paths[i].weight);
  assert.equal(await shownWeight(), through(stacks, fragment));
  await page.screenshot({ path: path.join(shots, 'focus.png'), fullPage: false });
  // Extend toward callers: click the widest direct caller.
  const callers = page.locator('#flame-callers div');
  assert.ok((await callers.count()) > 0);
  const widths = await callers.evaluateAll((ds) =>
    ds.map((d) => [d.textContent, parseFloat(d.style.width), parseFloat(d.style.top)]),
  );
  const lowest = Math.max(...widths.map((w) => w[2]));
  const direct = widths
    .map((w, k) => [...w, k])
    .filter((w) => w[2] === lowest)
    .sort((a, b) => b[1] - a[1])[0];
  const caller = direct[0];
  await callers.nth(direct[3]).click();
  await page.waitForFunction((n) => decodeURIComponent(location.hash).includes(n), caller);
  await settled(page);
  const longer = [caller, ...fragment];
  // The URL changes before the focus is redrawn: wait for the redraw.
  await page
    .waitForFunction(
      (t) => (document.querySelector('#fragment-bar')?.textContent ?? '').startsWith(t),
      longer.join(' › '),
      { timeout: 5000 },
    )
    .catch(() => {});
  await settled(page);
  assert.ok((await page.$eval('#fragment-bar', (d) => d.textContent)).startsWith(longer.join(' › ')));
  assert.equal(await shownWeight(), through(stacks, longer));
  // The URL holds the focus: a reload shows it again.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('#fragment-bar');
  await settled(page);
  assert.equal(await shownWeight(), through(stacks, longer));
  // Retract the outermost frame with the keyboard.
  await page.keyboard.press('[');
  await page.waitForFunction(() => !document.querySelector('#retract-callers'));
  await settled(page);
  assert.equal(await shownWeight(), through(stacks, fragment));
  await page.close();
});

test('the trace is answered only with the token of the printed URL', async () => {
  const url = await serve([trace]);
  const page = await open(url);
  // The page itself sends the token, in a header.
  assert.equal(await page.evaluate(() => fetch('/api/info').then((r) => r.status)), 401);
  const token = new URL(url).searchParams.get('token');
  assert.equal(await page.evaluate((t) => fetch('/api/info?token=' + t + 'x').then((r) => r.status), token), 403);
  assert.equal(await page.evaluate((t) => fetch('/api/info?token=' + t).then((r) => r.status), token), 200);
  // Without the token the page loads, says why it has nothing, and shows nothing.
  const bare = await blank();
  await bare.goto(url.replace(/\?token=.*/, ''));
  await bare.waitForFunction(() => document.getElementById('status').textContent !== '');
  assert.match(await bare.textContent('#status'), /cannot load the trace: .*token/);
  assert.equal(await bare.locator('#top-table tbody tr').count(), 0);
  await bare.close();
  await page.close();
});

test('the info answers while slow queries run', async () => {
  const big = path.join(root, 'target/view-concurrency.ctf');
  execFileSync(tracekit, ['memtrace', 'sample', '-q', '-o', big, '--allocs', '400000']);
  const url = await serve([big]);
  const page = await open(url);
  const token = new URL(url).searchParams.get('token');
  // Distinct slow queries, more than the workers, then the info: it must not
  // wait for them. Five, as a browser opens at most six connections to a
  // server: a sixth query would hold the info in the browser, not the server.
  const timings = await page.evaluate(async (t) => {
    const h = { headers: { Authorization: 'Bearer ' + t } };
    const t0 = performance.now();
    const slow = [];
    for (let i = 1; i <= 5; i++) {
      slow.push(
        fetch(`/api/flamegraph?arg=--min-size&arg=${i}`, h)
          .then((r) => r.text())
          .then(() => performance.now() - t0),
      );
    }
    await new Promise((r) => setTimeout(r, 20));
    const i0 = performance.now();
    await fetch('/api/info', h).then((r) => r.json());
    const info = performance.now() - i0;
    return { info, answered: performance.now() - t0, slow: await Promise.all(slow) };
  }, token);
  const said = `info took ${timings.info} ms; the slow queries ended at ${JSON.stringify(timings.slow)} ms`;
  assert.ok(
    Math.max(...timings.slow) > timings.answered,
    'the slow queries were not slow enough to test anything: ' + said,
  );
  assert.ok(timings.info < 200, said);
  await page.close();
});

test('a damaged trace is shown as far as it reads, under a banner', async () => {
  // The whole trace, then a packet header cut short: an error, not a packet
  // skipped with a warning.
  const cut = path.join(root, 'target/view-damaged.ctf');
  writeFileSync(cut, Buffer.concat([readFileSync(trace), Buffer.from([0xc1, 0x1f, 0xfc, 0xc1, 0, 0])]));
  const page = await open(await serve([cut]));
  // info exits with status 1 on a damaged trace, after its JSON.
  let out;
  try {
    out = execFileSync(tracekit, ['memtrace', 'info', '--json', cut], { stdio: ['ignore', 'pipe', 'ignore'] });
  } catch (e) {
    out = e.stdout;
  }
  const info = JSON.parse(out.toString());
  assert.ok(info.damage, 'the cut trace is damaged');
  const banner = await page.textContent('#damage');
  assert.ok(await page.isVisible('#damage'));
  assert.match(
    banner,
    new RegExp(`damaged at byte ${info.damage.offset}: .*${info.damage.events_before} events before it`),
  );
  // The table is of the events before the damage, as top prints them.
  const rows = await topRows(page);
  assert.ok(rows.length > 0);
  await page.close();
  // A whole trace has no banner.
  const whole = await open(await serve([trace]));
  assert.ok(!(await whole.isVisible('#damage')));
  await whole.close();
});
