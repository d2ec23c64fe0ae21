// The timeline's drawing: rows laid out from the tracks, the time axis, the
// slices of the server's window answers, and what a point on the canvas is.
// Times are nanoseconds from the trace's first time.

import { colour } from './dom.js';

export const LABEL = 200;
export const AXIS = 26;
export const HEADER = 18;
export const LANE = 17;
export const COUNTER = 40;
// The width of a track's fold toggle, left of its name.
export const TOGGLE = 18;
const SCROLLBAR = 14;

// Rows: per track a header and a row per lane (for a folded track its
// outermost lanes only: the outermost, its busy-ness over time, and as many
// more as the room left lets); per counter one row. Pinned rows first, in the
// order pinned, in a band that does not scroll. Every process (one alone too)
// has its tracks under a header row of its own, and a process in
// `closed` shows its header alone (its pinned tracks stay pinned). `room` is
// the height the rows may fill: what the rows leave of it is shared among the
// folded tracks, a lane at a time, in the order of the tracks, so that a window
// with few deep tracks is not left empty below them.
export function layout(tracks, counters, pinned, folded = [], room = 0, closed = []) {
  const grouped = tracks.length > 0;
  const hidden = (t) => closed.includes(t.pid) && !pinned.includes(t.id);
  const processes = new Set(tracks.map((t) => t.pid)).size;
  const shown = new Map();
  for (const t of tracks) shown.set(t.id, folded.includes(t.id) ? Math.min(t.lanes, 1) : t.lanes);
  const rowsHeight = () =>
    tracks.reduce((h, t) => h + (hidden(t) ? 0 : HEADER + shown.get(t.id) * LANE), 0) +
    processes * HEADER +
    counters.length * COUNTER;
  let spare = Math.floor((room - rowsHeight()) / LANE);
  const growing = tracks.filter((t) => folded.includes(t.id) && !hidden(t));
  while (spare > 0) {
    const before = spare;
    for (const t of growing) {
      if (spare > 0 && shown.get(t.id) < t.lanes) {
        shown.set(t.id, shown.get(t.id) + 1);
        spare--;
      }
    }
    if (spare === before) break;
  }
  const trackRow = (t, y) => {
    const lanes = shown.get(t.id);
    return { kind: 'track', id: t.id, h: HEADER + lanes * LANE, lanes, track: t, y };
  };
  const rows = [];
  const add = (row, list) => {
    list.push(row);
    return row.h;
  };
  const pinnedRows = [];
  const rest = [];
  let y = 0;
  for (const id of pinned) {
    const t = tracks[id];
    if (t) y += add(trackRow(t, y), pinnedRows);
  }
  const band = y;
  let z = 0;
  let pid = null;
  for (const t of tracks) {
    if (grouped && t.pid !== pid) {
      pid = t.pid;
      const count = tracks.filter((u) => u.pid === pid).length;
      const header = { kind: 'process', id: pid, h: HEADER, pid, process: t.process, tracks: count, y: z };
      z += add({ ...header, closed: closed.includes(pid) }, rest);
    }
    if (pinned.includes(t.id) || hidden(t)) continue;
    z += add(trackRow(t, z), rest);
  }
  for (const c of counters) z += add({ kind: 'counter', id: c.id, h: COUNTER, counter: c, y: z }, rest);
  for (const r of pinnedRows) rows.push({ ...r, pinned: true });
  for (const r of rest) rows.push({ ...r, pinned: false });
  return { rows, band, height: z };
}

// Where a row is on the canvas, scrolled by `scroll`.
export function rowTop(row, lay, scroll) {
  return row.pinned ? AXIS + row.y : AXIS + lay.band + row.y - scroll;
}

export function plotWidth(width) {
  return Math.max(1, width - LABEL - SCROLLBAR);
}

export function xOf(view, width, t) {
  return LABEL + ((t - view.from) / (view.to - view.from)) * plotWidth(width);
}

export function timeAt(view, width, x) {
  return view.from + ((x - LABEL) / plotWidth(width)) * (view.to - view.from);
}

// A duration, in the unit that suits it.
export function duration(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return `${ns} ns`;
  if (a < 1e6) return `${+(ns / 1e3).toPrecision(4)} µs`;
  if (a < 1e9) return `${+(ns / 1e6).toPrecision(4)} ms`;
  return `${+(ns / 1e9).toPrecision(5)} s`;
}

const widths = new Map();
function textWidth(ctx, s) {
  let w = widths.get(s);
  if (w === undefined) {
    w = ctx.measureText(s).width;
    if (widths.size > 20000) widths.clear();
    widths.set(s, w);
  }
  return w;
}

// `s` cut to fit `w` pixels, or '' when not even a letter fits.
function fit(ctx, s, w) {
  if (w < 14) return '';
  if (textWidth(ctx, s) <= w) return s;
  const per = textWidth(ctx, s) / s.length;
  const n = Math.floor(w / per) - 1;
  return n >= 1 ? s.slice(0, n) + '…' : '';
}

// A track's own name: an async track holds a task's async slices, or a
// process's async slices of one name (a kind of task).
function trackName(t) {
  return t.kind === 'async' ? `${t.name ?? 'async'} (async)` : `${t.name ?? 'thread'} [${t.tid}]`;
}

function trackLabel(t) {
  return `${trackName(t)} · ${t.process ?? 'process'} [${t.pid}]`;
}

export function labelOf(row) {
  if (row.kind === 'process') {
    return `${row.process ?? 'process'} [${row.pid}] · ${row.tracks} track${row.tracks === 1 ? '' : 's'}`;
  }
  if (row.kind === 'counter') {
    const c = row.counter;
    return `${c.name}${c.series && c.series !== c.name ? ' · ' + c.series : ''} (${c.pid})`;
  }
  return trackLabel(row.track);
}

function ticks(view, width) {
  const span = view.to - view.from;
  const target = (span / plotWidth(width)) * 110;
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(target, 1))));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= target) ?? 10 * p;
  const out = [];
  for (let t = Math.ceil(view.from / step) * step; t <= view.to; t += step) out.push(t);
  return out;
}

// Draws everything: `data` is the latest window answer (by track id), drawn
// at the current view whatever view it was asked for.
export function draw(ctx, s) {
  const { width, height, view, lay, scroll, data, names } = s;
  ctx.clearRect(0, 0, width, height);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  const byTrack = new Map();
  for (const t of data?.tracks ?? []) byTrack.set(t.track, t);
  const counters = new Map();
  for (const c of data?.counters ?? []) counters.set(c.counter, c);
  const x = (t) => xOf(view, width, t);
  const right = width - SCROLLBAR;
  const drawRow = (row) => {
    const top = rowTop(row, lay, scroll);
    if (top + row.h < AXIS || top > height) return;
    ctx.fillStyle = row.pinned ? '#eef3fb' : row.kind === 'process' ? '#e2e6ee' : '#f4f4f4';
    ctx.fillRect(0, top, width, HEADER);
    ctx.fillStyle = '#333';
    // Room for the toggle of a process, or of a track of more than one lane.
    const indent = row.kind === 'process' || (row.kind === 'track' && row.track.lanes > 1) ? TOGGLE : 4;
    ctx.font = row.kind === 'process' ? 'bold 11px system-ui, sans-serif' : '11px system-ui, sans-serif';
    // Under its process's header a track is named alone, so that the name
    // fits; pinned above the headers, with its process.
    const label = row.kind === 'track' && !row.pinned ? trackName(row.track) : labelOf(row);
    ctx.fillText(fit(ctx, (row.pinned ? '▲ ' : '') + label, LABEL - indent - 4), indent, top + HEADER / 2);
    ctx.strokeStyle = '#ddd';
    ctx.beginPath();
    ctx.moveTo(0, top + row.h - 0.5);
    ctx.lineTo(width, top + row.h - 0.5);
    ctx.stroke();
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL, top, right - LABEL, row.h);
    ctx.clip();
    if (row.kind === 'counter') {
      drawCounter(ctx, row, top, counters.get(row.id), x, right);
    } else if (row.kind === 'track') {
      drawTrack(ctx, s, row, top, byTrack.get(row.id), names, x, right);
    }
    ctx.restore();
  };
  for (const row of lay.rows) if (!row.pinned) drawRow(row);
  // The pinned band over the scrolled rows.
  if (lay.band > 0) {
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, AXIS, width, lay.band);
    for (const row of lay.rows) if (row.pinned) drawRow(row);
    ctx.strokeStyle = '#88a';
    ctx.beginPath();
    ctx.moveTo(0, AXIS + lay.band + 0.5);
    ctx.lineTo(width, AXIS + lay.band + 0.5);
    ctx.stroke();
  }
  drawFlows(ctx, s, x);
  drawArea(ctx, s, x);
  drawAxis(ctx, view, width, x);
}

function drawTrack(ctx, s, row, top, answer, names, x, right) {
  if (!answer) return;
  const sel = s.selected;
  // Rectangles batched by colour (and merged runs apart, paler): one fill
  // per colour rather than per slice; then the names that fit.
  const batches = new Map();
  const labels = [];
  let outline = null;
  answer.lanes.forEach((items, lane) => {
    if (lane >= row.lanes) return;
    const y = top + HEADER + lane * LANE;
    if (y > s.height || y + LANE < AXIS) return;
    for (const it of items) {
      const x0 = Math.max(x(it[0]), LABEL - 2);
      const x1 = Math.min(it[1] === null ? right : x(it[1]), right + 2);
      if (x1 < LABEL || x0 > right) continue;
      const w = Math.max(x1 - x0, 1);
      const merged = it.length > 4;
      const key = merged ? -1 - it[2] : it[2];
      let batch = batches.get(key);
      if (!batch) batches.set(key, (batch = []));
      batch.push(x0, y + 1, w);
      if (!merged && w > 14) labels.push(it[2], x0, y, w);
      if (!merged && sel && sel.track === row.id && sel.lane === lane && sel.index === it[3]) {
        outline = [x0, y, w];
      }
    }
  });
  for (const [key, rects] of batches) {
    const merged = key < 0;
    ctx.fillStyle = colour(names[merged ? -1 - key : key] ?? '');
    ctx.globalAlpha = merged ? 0.6 : 1;
    ctx.beginPath();
    for (let i = 0; i < rects.length; i += 3) ctx.rect(rects[i], rects[i + 1], rects[i + 2], LANE - 2);
    ctx.fill();
  }
  ctx.globalAlpha = 1;
  ctx.fillStyle = '#111';
  for (let i = 0; i < labels.length; i += 4) {
    const text = fit(ctx, names[labels[i]] ?? '', labels[i + 3] - 4);
    if (text) ctx.fillText(text, labels[i + 1] + 2, labels[i + 2] + LANE / 2);
  }
  if (outline) {
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 2;
    ctx.strokeRect(outline[0] + 1, outline[1] + 1, Math.max(outline[2] - 2, 1), LANE - 2);
    ctx.lineWidth = 1;
  }
  ctx.fillStyle = '#333';
  for (const [t] of answer.instants) {
    const cx = x(t);
    const cy = top + HEADER / 2;
    ctx.beginPath();
    ctx.moveTo(cx, cy - 5);
    ctx.lineTo(cx + 4, cy);
    ctx.lineTo(cx, cy + 5);
    ctx.lineTo(cx - 4, cy);
    ctx.fill();
  }
}

function drawCounter(ctx, row, top, answer, x, right) {
  if (!answer || answer.points.length === 0) return;
  const c = row.counter;
  const lo = Math.min(0, c.min ?? 0);
  const hi = Math.max(c.max ?? 1, lo + 1e-9);
  const y = (v) => top + COUNTER - 2 - ((v - lo) / (hi - lo)) * (COUNTER - HEADER / 2 - 4);
  ctx.fillStyle = 'rgba(70, 120, 200, 0.45)';
  ctx.strokeStyle = 'rgb(50, 90, 170)';
  ctx.beginPath();
  ctx.moveTo(Math.max(x(answer.points[0][0]), LABEL), y(lo));
  const pts = answer.points;
  for (let i = 0; i < pts.length; i++) {
    const x0 = Math.max(x(pts[i][0]), LABEL);
    const x1 = i + 1 < pts.length ? x(pts[i + 1][0]) : right;
    ctx.lineTo(x0, y(pts[i][2]));
    ctx.lineTo(Math.max(x1, x0 + 1), y(pts[i][2]));
  }
  ctx.lineTo(right, y(lo));
  ctx.closePath();
  ctx.fill();
  ctx.fillStyle = '#333';
  ctx.fillText(`max ${Number(c.max ?? 0).toPrecision(4)}`, LABEL + 4, top + HEADER / 2);
}

function drawFlows(ctx, s, x) {
  const flows = s.data?.flows ?? [];
  if (flows.length === 0) return;
  const rows = new Map();
  for (const r of s.lay.rows) if (r.kind === 'track') rows.set(r.id, r);
  // At the slice the flow leaves from or arrives at (its track's header
  // when none is open there).
  const yOf = (track, depth) => {
    const r = rows.get(track);
    if (!r) return null;
    const top = rowTop(r, s.lay, s.scroll);
    return depth === null || depth === undefined ? top + HEADER / 2 : top + HEADER + depth * LANE + LANE / 2;
  };
  ctx.strokeStyle = 'rgba(60, 60, 60, 0.8)';
  ctx.fillStyle = 'rgba(60, 60, 60, 0.8)';
  for (const f of flows) {
    for (let i = 0; i + 1 < f.length; i++) {
      const [ta, a, , da] = f[i];
      const [tb, b, , db] = f[i + 1];
      const ya = yOf(ta, da);
      const yb = yOf(tb, db);
      if (ya === null || yb === null) continue;
      const xa = x(a);
      const xb = x(b);
      ctx.beginPath();
      ctx.moveTo(xa, ya);
      ctx.bezierCurveTo(xa + 30, ya, xb - 30, yb, xb, yb);
      ctx.stroke();
      const angle = Math.atan2(yb - ya, 30);
      ctx.beginPath();
      ctx.moveTo(xb, yb);
      ctx.lineTo(xb - 7 * Math.cos(angle - 0.4), yb - 7 * Math.sin(angle - 0.4));
      ctx.lineTo(xb - 7 * Math.cos(angle + 0.4), yb - 7 * Math.sin(angle + 0.4));
      ctx.fill();
    }
  }
}

// The selected range over the tracks it holds, each track's band shaded: what
// is shaded is what the selection counts.
function drawArea(ctx, s, x) {
  const a = s.area;
  if (!a) return;
  const x0 = Math.max(x(Math.min(a.from, a.to)), LABEL);
  const x1 = Math.min(x(Math.max(a.from, a.to)), s.width);
  const w = Math.max(x1 - x0, 1);
  const held = new Set(a.tracks);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, AXIS, s.width, s.height - AXIS);
  ctx.clip();
  for (const row of s.lay.rows) {
    if (row.kind !== 'track' || !held.has(row.id)) continue;
    const top = rowTop(row, s.lay, s.scroll);
    ctx.fillStyle = 'rgba(40, 100, 220, 0.12)';
    ctx.fillRect(x0, top, w, row.h);
    ctx.strokeStyle = 'rgba(40, 100, 220, 0.8)';
    ctx.strokeRect(x0 + 0.5, top + 0.5, w, row.h - 1);
  }
  ctx.restore();
}

function drawAxis(ctx, view, width, x) {
  ctx.fillStyle = '#fafafa';
  ctx.fillRect(0, 0, width, AXIS);
  ctx.strokeStyle = '#bbb';
  ctx.beginPath();
  ctx.moveTo(0, AXIS - 0.5);
  ctx.lineTo(width, AXIS - 0.5);
  ctx.stroke();
  ctx.fillStyle = '#444';
  ctx.fillText(`${duration(Math.round(view.to - view.from))} shown`, 4, AXIS / 2);
  for (const t of ticks(view, width)) {
    const px = Math.round(x(t)) + 0.5;
    if (px < LABEL) continue;
    ctx.strokeStyle = '#999';
    ctx.beginPath();
    ctx.moveTo(px, AXIS - 7);
    ctx.lineTo(px, AXIS);
    ctx.stroke();
    ctx.fillText(duration(Math.round(t)), px + 3, AXIS / 2 - 2);
  }
}

// What is at (px, py): a row and, in a lane, the item drawn there.
export function hit(s, px, py) {
  if (py < AXIS) return { axis: true };
  const pinnedRows = s.lay.rows.filter((r) => r.pinned);
  const rows = py < AXIS + s.lay.band ? pinnedRows : s.lay.rows.filter((r) => !r.pinned);
  const row = rows.find((r) => {
    const top = rowTop(r, s.lay, s.scroll);
    return py >= top && py < top + r.h;
  });
  if (!row) return {};
  if (px < LABEL) return { row, label: true };
  if (row.kind !== 'track') return { row };
  const lane = Math.floor((py - rowTop(row, s.lay, s.scroll) - HEADER) / LANE);
  const answer = (s.data?.tracks ?? []).find((t) => t.track === row.id);
  const items = lane >= 0 && lane < row.lanes && answer ? answer.lanes[lane] : null;
  if (!items) return { row };
  const t = timeAt(s.view, s.width, px);
  const slack = (s.view.to - s.view.from) / plotWidth(s.width);
  // Items are in time order: the last that starts at or before the point.
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (items[mid][0] <= t + slack) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo - 1; i >= 0 && i >= lo - 3; i--) {
    const it = items[i];
    const end = it[1] === null ? Infinity : it[1];
    if (end + slack >= t) return { row, lane, item: it };
  }
  return { row, lane };
}
