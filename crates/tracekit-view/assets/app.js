// tracekit view: the page. Every figure comes from the server's /api/
// endpoints, which answer what `tracekit memtrace <subcommand> --json` prints;
// the page turns the filter into that subcommand's options. This module puts
// the page together: the trace's info, the redraw of the view, the controls.

import { api, follow } from './api.js';
import { $, bytes, el, setStatus, showDamage } from './dom.js';
import { readForm, writeForm } from './filter.js';
import { renderDiff, renderFlame } from './flame.js';
import { renderGraph, setupDrag } from './graph.js';
import { loadState, page, resetFilter, saveState, state, filterArgs } from './state.js';
import { renderCompare, renderFunctions, renderGrowing, renderTop, renderTree } from './tables.js';

function renderInfo() {
  const bytesPerSample = page.info.word_size / 8 / page.info.sample_rate;
  const rows = [
    ['executable', page.info.executable_name],
    ['pid', page.info.pid],
    ['host', page.info.host_name],
    ['word size', page.info.word_size + ' bits'],
    ['start time', page.info.start_time],
    ['duration', (page.info.duration_us / 1e6).toFixed(3) + ' s'],
    ['sample rate', `${Number(page.info.sample_rate.toPrecision(6))} (1/${Math.round(bytesPerSample)} bytes)`],
    ['context', page.info.context === null ? '(none)' : page.info.context],
    [
      'allocations',
      page.info.allocs + ` (${page.info.minor} minor, ${page.info.major} major, ${page.info.external} external)`,
    ],
    ['events', page.info.events],
  ];
  const dl = el('dl');
  for (const [k, v] of rows) dl.append(el('dt', { text: k }), el('dd', { text: String(v) }));
  $('info').replaceChildren(dl);
  const f = page.features.followed;
  const following = f ? (f.writing ? ' · following, still written' : ' · followed to its end') : '';
  $('title').textContent = page.info.file + following;
  $('title').dataset.followed = f ? (f.writing ? 'writing' : 'ended') : '';
}

// A trace followed while its program writes it (`--follow`): the view asked
// for again of what it has now, each time it grew.
function followTrace() {
  follow(page.features.followed, {
    grew: async () => {
      try {
        [page.info, page.full] = await Promise.all([api('info', []), api('timeline', ['--points', '450'])]);
      } catch (e) {
        setStatus('cannot load the trace: ' + e.message, true);
        return false;
      }
      await refresh();
    },
    seen: (f) => {
      page.features.followed = f;
      renderInfo();
    },
  });
}

async function refresh() {
  saveState();
  const gen = ++page.generation;
  setStatus('working…');
  for (const b of document.querySelectorAll('#tabs button'))
    b.setAttribute('aria-selected', String(b.dataset.tab === state.tab));
  try {
    const args = filterArgs();
    const view =
      {
        top: renderTop,
        flame: renderFlame,
        callees: (g) => renderTree(g, false),
        callers: (g) => renderTree(g, true),
        functions: renderFunctions,
        growing: renderGrowing,
        compare: renderCompare,
        diff: renderDiff,
      }[state.tab] || renderTop;
    // The graph's pass and the view's run side by side on the server.
    const shown = view(gen);
    shown.catch(() => {});
    const filtered = args.length ? await api('timeline', ['--points', '450', ...args]) : null;
    if (gen !== page.generation) return;
    page.lastFiltered = filtered;
    renderGraph(filtered);
    const peak = page.full.peak;
    const all = page.full.totals;
    $('summary').textContent =
      `${all.allocs} allocations, ${bytes(all.bytes)}; peak live heap ${bytes(peak.bytes)} at ${peak.time_s.toFixed(3)} s` +
      (filtered
        ? `; filtered: ${filtered.totals.allocs} allocations, ${bytes(filtered.totals.bytes)}, peak ${bytes(filtered.peak.bytes)} at ${filtered.peak.time_s.toFixed(3)} s`
        : '');
    await shown;
    if (gen === page.generation) setStatus('');
  } catch (e) {
    if (gen === page.generation) setStatus(e.message, true);
  }
}

async function main() {
  loadState();
  try {
    [page.info, page.full, page.features] = await Promise.all([
      api('info', []),
      api('timeline', ['--points', '450']),
      api('features', []),
    ]);
  } catch (e) {
    setStatus('cannot load the trace: ' + e.message, true);
    return;
  }
  $('compare-tab').hidden = !page.features.compare;
  // The compared trace's live heap, drawn over this one's.
  if (page.features.compare) {
    try {
      page.base = await api('timeline', ['--points', '450', '--base']);
    } catch (e) {
      setStatus('cannot load the compared trace: ' + e.message, true);
    }
  }
  // A damaged trace is shown as far as it reads, and says so, as the command
  // line does with its exit status.
  if (page.info.damage) {
    const d = page.info.damage;
    showDamage(
      `This trace is damaged at byte ${d.offset}: ${d.message}. Everything shown is of the ${d.events_before} events before it.`,
    );
  }
  renderInfo();
  writeForm();
  setupDrag();
  $('filter-form').addEventListener('submit', (e) => {
    e.preventDefault();
    readForm();
    state.zoom = [];
    refresh();
  });
  document.addEventListener('keydown', (e) => {
    // Keyboard on the focus: [ and ] drop its outermost and innermost frame, Escape clears it.
    if (state.tab !== 'flame' || e.target.closest('input, select, textarea')) return;
    if (e.key === 'Escape' && state.fragment.length) state.fragment = [];
    else if (e.key === '[' && state.fragment.length > 1) state.fragment = state.fragment.slice(1);
    else if (e.key === ']' && state.fragment.length > 1) state.fragment = state.fragment.slice(0, -1);
    else return;
    state.zoom = [];
    refresh();
  });
  $('reset').addEventListener('click', () => {
    resetFilter();
    writeForm();
    refresh();
  });
  $('show-rate').addEventListener('change', () => renderGraph(page.lastFiltered));
  $('wall-time').addEventListener('change', () => renderGraph(page.lastFiltered));
  $('c-add').addEventListener('click', () => {
    const t = $('c-text').value.trim();
    if (!t) return;
    state.clauses.push({ k: $('c-kind').value, m: $('c-match').value, t });
    $('c-text').value = '';
    writeForm();
  });
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => {
      state.tab = b.dataset.tab;
      refresh();
    });
  }
  window.addEventListener('hashchange', () => {
    loadState();
    writeForm();
    refresh();
  });
  window.addEventListener('resize', () => renderGraph(page.lastFiltered));
  await refresh();
  document.body.dataset.ready = 'true';
  if (page.features.followed?.writing) followTrace();
}

page.refresh = refresh;
main();
