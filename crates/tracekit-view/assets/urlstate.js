// What the URL's fragment holds, for both pages: a page declares a schema
// that gives each key how the fragment writes it and its default, and reads
// and writes its view through it, so that a link or a reload shows the view
// again.
//
// The kinds: 'text' as is; 'list' comma-separated strings; 'ints'
// comma-separated integers (anything else in the list is dropped); 'number'
// a finite number (default null: nothing written); 'json' as JSON. A key at
// its default is left out of the fragment; a key the fragment lacks, or holds
// unreadably, takes its default. Keys are written in the schema's order.

const write = (kind, v) => {
  if (kind === 'json') return JSON.stringify(v);
  if (kind === 'list' || kind === 'ints') return v.join(',');
  if (kind === 'number') return v === null ? '' : String(v);
  return v;
};

function read(kind, v) {
  if (kind === 'text') return v;
  if (kind === 'list') return v.split(',').filter(Boolean);
  if (kind === 'ints') return read('list', v).map(Number).filter(Number.isInteger);
  if (kind === 'number') return v !== '' && Number.isFinite(+v) ? +v : undefined;
  try {
    return JSON.parse(v);
  } catch {
    return undefined;
  }
}

// A fresh copy of `key`'s default.
export const fresh = (schema, key) => structuredClone(schema[key][1]);

// The values the fragment holds, every key of the schema given.
export function readFragment(schema) {
  const p = new URLSearchParams(location.hash.slice(1));
  const out = {};
  for (const [k, [kind]] of Object.entries(schema)) {
    const v = p.has(k) ? read(kind, p.get(k)) : undefined;
    out[k] = v === undefined ? fresh(schema, k) : v;
  }
  return out;
}

// Writes `values` into the fragment, replacing the history's entry.
export function writeFragment(schema, values) {
  const p = new URLSearchParams();
  for (const [k, [kind, def]] of Object.entries(schema)) {
    const v = write(kind, values[k]);
    if (v !== write(kind, def)) p.set(k, v);
  }
  const hash = '#' + p.toString();
  if (location.hash !== hash) history.replaceState(null, '', hash);
}
