// The timeline page's panel under the canvas: the selected slice's details,
// and the selected range's call tree (a flame graph) and slices by name.

import { duration } from './canvas.js';
import { $, bytes, colour, el } from './dom.js';
import { diffColour, drawBoxes, layout } from './flamegraph.js';
import { api, busy, failed, page, span, state, writeUrl } from './timeline-state.js';

// Details of the selected slice.
export async function showDetails() {
  const s = state.selected;
  const box = $('details');
  if (!s) {
    box.replaceChildren();
    return;
  }
  busy(1);
  try {
    const d = await api('details', s);
    const rows = [
      ['Name', d.name],
      ['Category', d.category],
      ['Thread', d.kind === 'async' ? `async track of process ${d.pid}` : `${d.thread ?? ''} (${d.pid}/${d.tid})`],
      ['Start', `${duration(d.start)} (${d.start_ns} ns on the trace's clock)`],
      ['Duration', d.open ? 'open until the end of the trace' : `${duration(d.duration_ns)} (${d.duration_ns} ns)`],
      ['Self time', `${duration(d.self_ns)} (${d.self_ns} ns)`],
      ['Depth', String(d.lane)],
    ];
    const row = (k, v, cls) => el('tr', cls ? { class: cls } : {}, el('th', { text: k }), el('td', { text: v }));
    const args = Object.entries(d.args ?? {}).map(([k, v]) =>
      row(k, typeof v === 'string' ? v : JSON.stringify(v), 'arg'),
    );
    const table = el('table', { id: 'details-table' }, el('tbody', {}, ...rows.map(([k, v]) => row(k, v)), ...args));
    // An async slice's links, where those slices are async too: the span it
    // was made under, and the task that polls it, to follow a job to its task.
    for (const [key, label] of [
      ['parent', 'Made under'],
      ['within', 'Runs within'],
    ]) {
      const p = d[key];
      if (!p) continue;
      const go = el('button', { type: 'button', [`data-${key}`]: `${p.track},${p.lane},${p.index}`, text: p.name });
      go.addEventListener('click', () => {
        state.selected = { track: p.track, lane: p.lane, index: p.index };
        writeUrl();
        showDetails();
      });
      table.tBodies[0].append(el('tr', {}, el('th', { text: label }), el('td', {}, go)));
    }
    box.replaceChildren(el('h2', { text: 'Slice' }), table);
    box.dataset.slice = `${s.track},${s.lane},${s.index}`;
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}

// The server's call tree (`[parent, name, weight]` per node, parents first)
// as the boxes to draw: `{parent, name, total, node}` in preorder, heaviest
// callee first, under a root as wide as the drawing, from `focus`'s subtree
// (the whole tree for null); boxes under half a pixel left out.
function flameNodes(tree, width, focus) {
  const children = tree.nodes.map(() => []);
  const roots = [];
  tree.nodes.forEach((n, i) => (n[0] === null ? roots : children[n[0]]).push(i));
  const byWeight = (a, b) => tree.nodes[b][2] - tree.nodes[a][2];
  const tops = focus === null ? roots : [focus];
  const total = tops.reduce((s, i) => s + tree.nodes[i][2], 0) || 1;
  const out = [{ parent: -1, name: '', total, node: null }];
  const add = (list, parent) => {
    for (const i of list.sort(byWeight)) {
      const [, name, weight, , base] = tree.nodes[i];
      if ((weight / total) * width < 0.5) break;
      out.push({ parent, name: tree.names[name] ?? '', total: weight, base, node: i });
      add(children[i], out.length - 1);
    }
  };
  add(tops, 0);
  return out;
}

// The tree inverted: each node's self weight (what its callees do not cover)
// charged to its path read from the node up to its root, so that the hottest
// leaves are the roots and their callers are under them.
function inverted(tree) {
  const self = tree.nodes.map((n) => n[2]);
  tree.nodes.forEach((n) => {
    if (n[0] !== null) self[n[0]] -= n[2];
  });
  const nodes = [];
  const index = new Map();
  tree.nodes.forEach((_, i) => {
    if (self[i] <= 0) return;
    let parent = null;
    for (let j = i; j !== null; j = tree.nodes[j][0]) {
      const key = `${parent}/${tree.nodes[j][1]}`;
      let k = index.get(key);
      if (k === undefined) {
        k = nodes.length;
        index.set(key, k);
        nodes.push([parent, tree.nodes[j][1], 0]);
      }
      nodes[k][2] += self[i];
      parent = k;
    }
  });
  return { ...tree, nodes };
}

// The range's flame graph in `flame`, `width` pixels wide: hover names a box's
// weight (`fmt`: a time, or bytes for the heap's), a click shows the box's
// subtree alone, Escape (or a click on the first box) the whole again;
// `invert` draws the inverted tree.
function drawFlame(flame, tree, width, crumbs, fmt = duration) {
  const shown = { focus: null, tree };
  const all = tree.total_ns || 1;
  // A tree merged with a baseline's: each box coloured by its change.
  const diff = tree.base_total_ns !== undefined;
  const largest = diff ? Math.max(1, ...tree.nodes.map((n) => Math.abs(n[2] - n[4]))) : 1;
  const signed = (d) => (d > 0 ? '+' : d < 0 ? '−' : '±') + duration(Math.abs(d));
  const render = () => {
    const nodes = flameNodes(shown.tree, width, shown.focus);
    flame.replaceChildren();
    flame.dataset.total = shown.focus === null ? tree.total_ns : nodes[0].total;
    flame.dataset.focus = shown.focus === null ? '' : (nodes[1]?.name ?? '');
    const share = (t) => ((100 * t) / all).toFixed(1) + '%';
    drawBoxes(flame, nodes, layout(nodes, width), {
      row: 16,
      skipRoot: true,
      colour: diff ? (name, n) => diffColour((n.total - n.base) / largest) : (name) => colour(name),
      minText: 18,
      title: (n) =>
        `${n.name}: ${fmt(n.total)} (${share(n.total)} of the range)` +
        (diff ? `\nbaseline (A): ${duration(n.base)}, change ${signed(n.total - n.base)}` : ''),
      attrs: (n) => ({ 'data-total': n.total, ...(diff ? { 'data-base': n.base, 'data-name': n.name } : {}) }),
      click: (i) => {
        const node = nodes[i].node;
        shown.focus = shown.focus === node ? null : node;
        render();
        flame.focus();
      },
    });
    crumbs.textContent =
      shown.focus === null ? '' : `showing ${nodes[1]?.name ?? ''} alone (${fmt(nodes[0].total)}); Escape: all`;
  };
  flame.tabIndex = 0;
  flame.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || shown.focus === null) return;
    e.stopPropagation();
    shown.focus = null;
    render();
  });
  render();
  return (invert) => {
    shown.tree = invert ? inverted(tree) : tree;
    shown.focus = null;
    render();
  };
}

// What the joined heap (`--heap`) allocated in the range, as a flame graph
// above the table: the memtrace view's `flametree` nodes (objects under a
// root "all") as the range flame graph's.
async function heapFlame(box, table, from, to, tracks) {
  // What was allocated in the range, or what was live at some time in it, by
  // the selected threads (those that name their heap).
  const weigh = el('select', { id: 'heap-weigh' });
  weigh.append(
    el('option', { value: 'allocated', text: 'allocated in it' }),
    el('option', { value: 'live', text: 'live in it' }),
  );
  const heading = el('h2');
  const tools = el('p', { class: 'flame-tools' });
  const flame = el('div', { id: 'heap-flame', class: 'flame' });
  const before = table.previousSibling ?? table;
  for (const part of [heading, tools, flame]) box.insertBefore(part, before);
  const draw = async () => {
    const live = weigh.value === 'live';
    const params = { from, to, tracks: tracks.join(',') };
    const answer = await api('heap-flame', live ? { ...params, live: 'true' } : params);
    const t = answer.tree;
    const names = [];
    const ids = new Map();
    const nodes = t.nodes.slice(1).map((n) => {
      if (!ids.has(n.name)) {
        ids.set(n.name, names.length);
        names.push(n.name);
      }
      return [n.parent === 0 ? null : n.parent - 1, ids.get(n.name), n.total, n.self];
    });
    const w = Math.max(200, box.clientWidth - 24);
    flame.replaceChildren();
    flame.dataset.total = t.total;
    flame.dataset.weigh = weigh.value;
    flame.dataset.domains = answer.domains.join(',');
    flame.style.width = `${w}px`;
    const crumbs = el('span', { class: 'crumbs' });
    drawFlame(flame, { total_ns: t.total, nodes, names }, w, crumbs, bytes);
    const whose = answer.domains.length ? ` by its ${answer.domains.length === 1 ? 'thread' : 'threads'}` : '';
    heading.replaceChildren(
      `Heap flame graph of the range: ${bytes(t.total)} ${live ? 'live' : 'allocated'} in it${whose}`,
    );
    tools.replaceChildren(el('label', {}, 'weigh by ', weigh), ' ', crumbs);
  };
  weigh.addEventListener('change', () => draw().catch(failed));
  await draw();
}

// What the selected range is compared with: the baseline range chosen, else
// the compared trace (the same range of it, or the whole of it for the whole
// of this one), else nothing.
function baseParams(from, to) {
  if (state.base) {
    const b = state.base;
    return { base: 'range', base_from: b.from, base_to: b.to, base_tracks: b.tracks.join(',') };
  }
  if (!page.compares) return {};
  return from <= 0 && to >= span() ? { base: 'compare' } : { base: 'compare', base_from: from, base_to: to };
}

// The baseline's controls: choose the selected range as the baseline, or
// drop the one chosen.
function baselineTools(a) {
  const p = el('p', { class: 'baseline-tools' });
  if (state.base) {
    const b = state.base;
    const clear = el('button', { type: 'button', 'data-baseline-clear': '', text: 'clear the baseline' });
    clear.addEventListener('click', () => {
      state.base = null;
      writeUrl();
      showArea();
    });
    p.append(
      `compared with the baseline (A): ${duration(b.to - b.from)} from ${duration(b.from)} on ${b.tracks.length} track${b.tracks.length === 1 ? '' : 's'} `,
      clear,
    );
  } else {
    const set = el('button', {
      type: 'button',
      'data-baseline-set': '',
      text: 'use this range as the baseline (A)',
    });
    set.addEventListener('click', () => {
      state.base = { from: Math.round(a.from), to: Math.round(a.to), tracks: [...a.tracks] };
      writeUrl();
      showArea();
    });
    p.append(page.compares ? 'compared with the trace given to --compare (A); or ' : '', set);
  }
  return p;
}

// Each name's figures in the baseline (A) and the range (B), the largest
// change of total time first (as `fxt top --diff` ranks them).
function changesTable(changes) {
  const signed = (d) => (d > 0 ? '+' : d < 0 ? '−' : '') + duration(Math.abs(d));
  const heads = ['Name', 'Count A', 'Count B', 'Total A', 'Total B', 'Change', 'Self A', 'Self B', 'Change'];
  const head = el('tr', {}, ...heads.map((k, i) => el('th', { ...(i ? { class: 'n' } : {}), text: k })));
  const rows = changes.map((c) => {
    const cells = [
      c.name + (c.kind === 'async' ? ' (async)' : ''),
      c.count_a,
      c.count_b,
      duration(c.total_ns_a),
      duration(c.total_ns_b),
      signed(c.total_change_ns),
      duration(c.self_ns_a),
      duration(c.self_ns_b),
      signed(c.self_change_ns),
    ];
    const change = (d) => ({ class: 'n ' + (d > 0 ? 'delta-up' : d < 0 ? 'delta-down' : '') });
    const tds = cells.map((v, i) =>
      el('td', {
        ...(i === 5 ? change(c.total_change_ns) : i === 8 ? change(c.self_change_ns) : i ? { class: 'n' } : {}),
        text: String(v),
      }),
    );
    return el('tr', { 'data-name': c.name, 'data-kind': c.kind }, ...tds);
  });
  return el('table', { id: 'changes-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
}

// With a trace to compare with and no range chosen: a button that compares
// the whole traces.
function wholeTraces(box) {
  const b = el('button', { type: 'button', 'data-compare-whole': '', text: 'compare the whole traces' });
  b.addEventListener('click', () => {
    state.area = { from: 0, to: span(), tracks: page.info.tracks.map((_, i) => i) };
    writeUrl();
    showArea();
  });
  box.replaceChildren(el('p', {}, 'A trace to compare with is served: select a range, or ', b));
}

// The selected range's slices by name, and its call tree.
export async function showArea() {
  const a = state.area;
  const box = $('selection');
  if (!a) {
    if (page.compares) wholeTraces(box);
    else box.replaceChildren();
    return;
  }
  busy(1);
  try {
    const from = Math.floor(Math.min(a.from, a.to));
    const to = Math.ceil(Math.max(a.from, a.to));
    const base = baseParams(from, to);
    const r = await api('selection', { from, to, tracks: a.tracks.join(','), ...base });
    const h = el('h2', {
      text: `${r.slices} slices in ${duration(to - from)} on ${a.tracks.length} track${a.tracks.length === 1 ? '' : 's'}`,
    });
    // A trace whose spans carry what was allocated inside them has its
    // allocated columns too.
    const allocated = r.names.some((n) => n.allocated);
    const columns = [
      ['Name', false],
      ['Count', true],
      ['Total', true],
      ['Self', true],
      ['Average', true],
      ['Max', true],
      ...(allocated
        ? [
            ['Allocated', true],
            ['Self allocated', true],
            ['Allocations', true],
          ]
        : []),
    ];
    const numeric = (n) => (n ? { class: 'n' } : {});
    const head = el('tr', {}, ...columns.map(([k, n]) => el('th', { ...numeric(n), text: k })));
    const rows = r.names.map((n) => {
      const cells = [
        n.name,
        n.count,
        duration(n.total_ns),
        duration(n.self_ns),
        duration(n.avg_ns),
        duration(n.max_ns),
        ...(allocated ? [bytes(n.allocated.bytes), bytes(n.allocated.self_bytes), n.allocated.allocations] : []),
      ];
      const tds = cells.map((c, i) => el('td', { ...numeric(i > 0), text: String(c) }));
      const data = allocated
        ? { 'data-allocated': n.allocated.bytes, 'data-self-allocated': n.allocated.self_bytes }
        : {};
      return el('tr', { 'data-count': n.count, 'data-total': n.total_ns, ...data }, ...tds);
    });
    const table = el('table', { id: 'selection-table' }, el('thead', {}, head), el('tbody', {}, ...rows));
    box.replaceChildren(h, baselineTools(a), table);
    if (r.changes) {
      box.insertBefore(el('h2', { text: `Changes from the baseline (A: ${r.base.slices} slices)` }), table);
      box.insertBefore(changesTable(r.changes), table);
    }
    // And its call tree, as a flame graph.
    const tree = await api('flame', { from, to, tracks: a.tracks.join(','), ...base });
    if (tree.nodes.length > 0) {
      const w = Math.max(200, box.clientWidth - 24);
      const flame = el('div', {
        id: 'flame',
        class: 'flame',
        'data-nodes': tree.nodes.length,
        'data-total': tree.total_ns,
      });
      flame.style.width = `${w}px`;
      const crumbs = el('span', { class: 'crumbs' });
      const invert = el('input', { type: 'checkbox', 'data-flame-invert': '' });
      const invertBy = drawFlame(flame, tree, w, crumbs);
      invert.addEventListener('change', () => invertBy(invert.checked));
      const diff = tree.base_total_ns !== undefined;
      const tools = el(
        'p',
        { class: 'flame-tools' },
        diff
          ? `width: the range (B, ${duration(tree.total_ns)}); colour: its change from the baseline (A, ${duration(tree.base_total_ns)}), red grew, blue shrank `
          : el('label', {}, invert, ' inverted: the hottest leaves first, their callers under them'),
        ' ',
        crumbs,
      );
      const firstTable = box.querySelector('#changes-table')?.previousSibling ?? table;
      box.insertBefore(
        el('h2', { text: diff ? 'Differential flame graph of the range' : 'Flame graph of the range' }),
        firstTable,
      );
      box.insertBefore(tools, firstTable);
      box.insertBefore(flame, firstTable);
      box.insertBefore(el('h2', { text: 'By name' }), table);
    }
    if (page.info?.heap) await heapFlame(box, table, from, to, a.tracks);
  } catch (e) {
    failed(e);
  } finally {
    busy(-1);
  }
}
