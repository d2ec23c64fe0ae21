// The filter editor: the form written from the state and read back into it.

import { $, el } from './dom.js';
import { state } from './state.js';

export function writeForm() {
  $('f-from').value = state.from;
  $('f-to').value = state.to;
  $('f-live').value = state.live;
  $('f-at').value = state.at;
  for (const k of ['cfrom', 'cto', 'lfrom', 'lto', 'vfrom', 'vto']) $('f-' + k).value = state[k];
  $('f-never').checked = !!state.never;
  $('f-minsize').value = state.minsize;
  $('f-maxsize').value = state.maxsize;
  $('f-location').value = state.location;
  for (const c of document.querySelectorAll('input[name=source]')) c.checked = state.sources.includes(c.value);
  const chips = state.clauses.map((c, i) => {
    const words = `${c.k} a frame whose ${c.m === 'function' ? 'function is' : c.k === 'hide' ? 'name contains' : 'location contains'} "${c.t}"`;
    const x = el('button', { type: 'button', class: 'chip', title: 'remove', text: words + ' ×' });
    x.addEventListener('click', () => {
      state.clauses.splice(i, 1);
      writeForm();
    });
    return x;
  });
  $('clauses').replaceChildren(...chips);
}

export function readForm() {
  state.from = $('f-from').value.trim();
  state.to = $('f-to').value.trim();
  state.live = $('f-live').value;
  state.at = $('f-at').value.trim();
  for (const k of ['cfrom', 'cto', 'lfrom', 'lto', 'vfrom', 'vto']) state[k] = $('f-' + k).value.trim();
  state.never = $('f-never').checked ? '1' : '';
  state.minsize = $('f-minsize').value.trim();
  state.maxsize = $('f-maxsize').value.trim();
  state.location = $('f-location').value.trim();
  state.sources = [...document.querySelectorAll('input[name=source]:checked')].map((c) => c.value);
}
