// The timeline page's keys and mouse: a drag pans, a drag with Shift or on
// the axis selects a range, a click selects a slice or pins a track, the
// wheel scrolls (zooms with Ctrl), and Perfetto's keys zoom and pan.

import { AXIS, duration, hit, labelOf, plotWidth, rowTop, timeAt } from './canvas.js';
import { $ } from './dom.js';
import { showArea } from './timeline-panel.js';
import { clampView, page, span, state, writeUrl } from './timeline-state.js';

// The tracks a selecting drag from `drag` to height `y` covers: those its
// heights cross (a drag at one height, the one track there), or every track
// for a drag on the axis.
function covered(drag, y) {
  const { lay, scroll } = page;
  const y0 = Math.min(drag.y, y);
  const y1 = Math.max(drag.y, y);
  return lay.rows
    .filter((row) => row.kind === 'track')
    .filter((row) => {
      if (drag.y < AXIS) return true;
      const top = rowTop(row, lay, scroll);
      return top <= y1 && top + row.h > y0;
    })
    .map((row) => row.id);
}

// What is under the mouse, whole, for the tooltip: a track's name (which its
// label cuts to fit) or a slice's name and length.
function whole(x, y) {
  const { lay, scroll } = page;
  const h = hit({ lay, scroll, data: page.data, view: state, width: page.width }, x, y);
  if (h.label) return labelOf(h.row);
  if (!h.item) return '';
  const [start, end, name, , count] = h.item;
  const length = end === null ? 'to the end' : duration(end - start);
  // A merged run is named by its longest slice.
  if (count !== undefined) return `${count} slices under a pixel, the longest ${page.names[name] ?? ''}`;
  return `${page.names[name] ?? ''} (${length})`;
}

// `view` holds what the keys and the mouse do to the view: zoom(factor, x),
// pan(fraction), setScroll(px), select(slice), search(backward), relayout(),
// changed(), redraw(), fetchWindow().
export function listen(canvas, scroller, view) {
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  canvas.addEventListener('mousedown', (e) => {
    canvas.focus();
    const [x, y] = at(e);
    page.drag = {
      x,
      y,
      from: state.from,
      to: state.to,
      selecting: e.shiftKey || y < AXIS,
      moved: false,
    };
  });
  window.addEventListener('mousemove', (e) => {
    const [x, y] = at(e);
    page.mouseX = x >= 0 && x <= page.width && y >= 0 && y <= page.height ? x : null;
    const drag = page.drag;
    if (!drag) {
      if (page.mouseX !== null) canvas.title = whole(x, y);
      return;
    }
    if (Math.abs(x - drag.x) + Math.abs(y - drag.y) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.selecting) {
      const a = timeAt(state, page.width, drag.x);
      const b = timeAt(state, page.width, x);
      state.area = {
        from: Math.max(0, Math.min(a, b)),
        to: Math.min(span(), Math.max(a, b)),
        tracks: covered(drag, y),
      };
      view.redraw();
    } else {
      const dt = ((x - drag.x) / plotWidth(page.width)) * (drag.to - drag.from);
      state.from = drag.from - dt;
      state.to = drag.to - dt;
      clampView();
      view.redraw();
      view.fetchWindow();
    }
  });
  window.addEventListener('mouseup', (e) => {
    if (!page.drag) return;
    const d = page.drag;
    page.drag = null;
    const [x, y] = at(e);
    const { lay, scroll } = page;
    if (d.moved && d.selecting && state.area) {
      const tracks = covered(d, y);
      // Whole nanoseconds: what the URL holds is what is asked.
      state.area = { from: Math.floor(state.area.from), to: Math.ceil(state.area.to), tracks };
      writeUrl();
      view.redraw();
      showArea();
      return;
    }
    if (d.moved) {
      view.changed();
      return;
    }
    const h = hit({ lay, scroll, data: page.data, view: state, width: page.width }, x, y);
    if (h.label && h.row.kind === 'track') {
      const i = state.pinned.indexOf(h.row.id);
      if (i >= 0) state.pinned.splice(i, 1);
      else state.pinned.push(h.row.id);
      view.relayout();
    } else if (h.item) {
      view.select({ track: h.row.id, lane: h.lane, index: h.item[3] });
    } else if (!h.axis) {
      view.select(null);
    }
  });
  canvas.addEventListener(
    'wheel',
    (e) => {
      e.preventDefault();
      const r = canvas.getBoundingClientRect();
      if (e.ctrlKey || e.metaKey) {
        view.zoom(Math.exp(e.deltaY * 0.002), e.clientX - r.left);
      } else if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        view.pan(e.deltaX / plotWidth(page.width));
      } else {
        view.setScroll(page.scroll + e.deltaY);
      }
    },
    { passive: false },
  );
  scroller.addEventListener('scroll', () => {
    if (Math.abs(scroller.scrollTop - page.scroll) >= 1) {
      page.scroll = scroller.scrollTop;
      writeUrl();
      view.redraw();
      view.fetchWindow();
    }
  });

  // Perfetto's keys.
  window.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLInputElement) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    switch (e.key.toLowerCase()) {
      case 'w':
        view.zoom(0.8, page.mouseX);
        break;
      case 's':
        view.zoom(1.25, page.mouseX);
        break;
      case 'a':
        view.pan(-0.1);
        break;
      case 'd':
        view.pan(0.1);
        break;
      case 'escape':
        state.area = null;
        showArea();
        view.select(null);
        break;
      case '/':
        e.preventDefault();
        $('search').focus();
        break;
      default:
        return;
    }
  });

  $('search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    view.search(false);
  });
  $('search').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && e.shiftKey) {
      e.preventDefault();
      view.search(true);
    }
  });
  $('search-prev').addEventListener('click', () => view.search(true));
}
