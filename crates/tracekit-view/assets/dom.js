// Small helpers of the page: elements, numbers, the status line, keyboard
// navigation of table rows.

export const $ = (id) => document.getElementById(id);

export function setStatus(msg, error) {
  $('status').textContent = msg || '';
  $('status').className = error ? 'error' : '';
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

// A stable number for a name, for its colour.
export function hash(s) {
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h;
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
