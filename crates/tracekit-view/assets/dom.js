// Small helpers of both pages: elements, numbers, the status line, the damage
// banner, colours, keyboard navigation of table rows.

export const $ = (id) => document.getElementById(id);

export function setStatus(msg, error) {
  $('status').textContent = msg || '';
  $('status').className = error ? 'error' : '';
}

// Says on the page that the trace is damaged, and how far it is shown.
export function showDamage(text) {
  $('damage').textContent = text;
  $('damage').hidden = false;
}

export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
}
export const pct = (x) => (100 * x).toFixed(1) + '%';
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// A stable number for a name, for its colour: FNV-1a of its UTF-16 units.
export function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

// A name's colour in a palette: 'wide' (any hue, three lightnesses: the
// timeline's slices and its range's flame graph) or 'warm' (the memtrace
// flame graph). Kept, as a timeline redraws the same names at every frame.
const PALETTES = {
  wide: (h) => `hsl(${h % 360}, 55%, ${58 + ((h >>> 9) % 3) * 6}%)`,
  warm: (h) => `hsl(${20 + (h % 40)}, 80%, ${60 + (h % 15)}%)`,
};
const colours = { wide: new Map(), warm: new Map() };
export function colour(name, palette = 'wide') {
  const kept = colours[palette];
  let c = kept.get(name);
  if (!c) {
    c = PALETTES[palette](hash(name));
    kept.set(name, c);
  }
  return c;
}

export function keyboardRows(table) {
  table.tabIndex = 0;
  table.addEventListener('keydown', (e) => {
    const rows = [...table.querySelectorAll('tbody tr')];
    let i = rows.findIndex((r) => r.classList.contains('selected'));
    if (e.key === 'ArrowDown') i = Math.min(rows.length - 1, i + 1);
    else if (e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'ArrowRight' && rows[i] && rows[i].expand) rows[i].expand();
    else if (e.key === 'ArrowLeft' && rows[i] && rows[i].collapse) rows[i].collapse();
    else if (e.key === 'Enter' && rows[i] && rows[i].focusView) {
      rows[i].focusView();
      return;
    } else return;
    e.preventDefault();
    rows.forEach((r) => r.classList.remove('selected'));
    if (rows[i]) {
      rows[i].classList.add('selected');
      rows[i].scrollIntoView({ block: 'nearest' });
    }
  });
}
