// The memory graph: the live heap over time, the filtered part over it, the
// allocation rate, the filter's ranges shaded; a drag chooses the allocation
// time range.

import { $, bytes } from './dom.js';
import { page, parseTime, state } from './state.js';
import { writeForm } from './filter.js';

const G = { left: 60, right: 10, top: 10, bottom: 22 };

function graphScale() {
  const svg = $('graph');
  const w = svg.clientWidth || 800;
  const h = svg.clientHeight || 180;
  const tmax = Math.max(page.info.duration_us / 1e6, page.base ? page.base.trace.duration_s : 0) || 1;
  const curves = page.base ? [page.full, page.base] : [page.full];
  const ymax = Math.max(1, ...curves.flatMap((c) => c.points.map((p) => p.live_bytes)));
  return {
    w,
    h,
    tmax,
    ymax,
    x: (t) => G.left + ((w - G.left - G.right) * t) / tmax,
    y: (v) => h - G.bottom - ((h - G.top - G.bottom) * v) / ymax,
    t: (px) => Math.min(tmax, Math.max(0, ((px - G.left) / (w - G.left - G.right)) * tmax)),
  };
}

function area(points, s, key) {
  if (!points.length) return '';
  let d = `M${s.x(0)},${s.y(0)}`;
  for (const p of points) d += `L${s.x(p.time_s)},${s.y(p[key])}`;
  d += `L${s.x(points[points.length - 1].time_s)},${s.y(0)}Z`;
  return d;
}

export function renderGraph(filtered) {
  const s = graphScale();
  const svg = $('graph');
  const ns = 'http://www.w3.org/2000/svg';
  const path = (cls, d) => {
    const p = document.createElementNS(ns, 'path');
    p.setAttribute('class', cls);
    p.setAttribute('d', d);
    return p;
  };
  const text = (x, y, t, anchor) => {
    const e = document.createElementNS(ns, 'text');
    e.setAttribute('x', x);
    e.setAttribute('y', y);
    if (anchor) e.setAttribute('text-anchor', anchor);
    e.textContent = t;
    return e;
  };
  const parts = [path('full', area(page.full.points, s, 'live_bytes'))];
  if (filtered) parts.push(path('filtered', area(filtered.points, s, 'live_bytes')));
  // The compared trace (A), a line over this one's area, on the same axes
  // (seconds from each trace's start).
  if (page.base) {
    let d = '';
    for (const p of page.base.points) d += (d ? 'L' : 'M') + s.x(p.time_s) + ',' + s.y(p.live_bytes);
    const line = path('base', d);
    const title = document.createElementNS(ns, 'title');
    title.textContent = `compared trace (A): peak ${bytes(page.base.peak.bytes)} at ${page.base.peak.time_s.toFixed(3)} s`;
    line.append(title);
    parts.push(line, text(s.w - G.right, G.top + 10, 'line: compared trace (A)', 'end'));
  }
  if ($('show-rate').checked) {
    const rmax = Math.max(1, ...page.full.points.map((p) => p.alloc_rate_bytes_per_s));
    let d = '';
    for (const p of page.full.points)
      d +=
        (d ? 'L' : 'M') +
        s.x(p.time_s) +
        ',' +
        (s.h - G.bottom - ((s.h - G.top - G.bottom) * p.alloc_rate_bytes_per_s) / rmax);
    parts.push(path('rate', d));
  }
  // The allocated range and the collected range of the filter, shaded.
  for (const [from, to, cls] of [
    [state.from, state.to, 'range'],
    [state.cfrom, state.cto, 'range collected'],
  ]) {
    if (!from && !to) continue;
    const a = s.x(parseTime(from) ?? 0);
    const b = s.x(parseTime(to) ?? s.tmax);
    const r = document.createElementNS(ns, 'rect');
    r.setAttribute('class', cls);
    r.setAttribute('x', Math.min(a, b));
    r.setAttribute('y', G.top);
    r.setAttribute('width', Math.abs(b - a));
    r.setAttribute('height', s.h - G.top - G.bottom);
    parts.push(r);
  }
  // The axis in seconds from the start, or in wall-clock time (UTC).
  const when = (t) =>
    $('wall-time').checked
      ? new Date(page.info.start_time_us / 1000 + t * 1000).toISOString().replace('T', ' ').replace('Z', '')
      : t.toFixed(2) + ' s';
  parts.push(
    text(G.left - 4, G.top + 10, bytes(s.ymax), 'end'),
    text(G.left - 4, s.h - G.bottom, '0', 'end'),
    text(G.left, s.h - 6, when(0)),
    text(s.w / 2, s.h - 6, when(s.tmax / 2), 'middle'),
    text(s.w - G.right, s.h - 6, when(s.tmax), 'end'),
  );
  svg.replaceChildren(...parts);
}

export function setupDrag() {
  const svg = $('graph');
  let start = null;
  svg.addEventListener('mousedown', (e) => {
    start = e.offsetX;
  });
  svg.addEventListener('mouseup', (e) => {
    if (start === null) return;
    const s = graphScale();
    const [a, b] = [start, e.offsetX].sort((x, y) => x - y);
    start = null;
    // A click: the flame graph of what is live at that time.
    if (b - a < 3) {
      state.live = 'at';
      state.at = Math.max(0, s.t(e.offsetX)).toFixed(6) + 's';
      state.tab = 'flame';
      state.zoom = [];
      writeForm();
      page.refresh();
      return;
    }
    state.from = s.t(a).toFixed(6) + 's';
    state.to = s.t(b).toFixed(6) + 's';
    state.zoom = [];
    writeForm();
    page.refresh();
  });
}
