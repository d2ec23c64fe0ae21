// The server's answers, for both pages. Every endpoint takes named
// parameters. A memtrace trace's endpoints answer what `tracekit memtrace
// <endpoint> --json` prints for the same options, each option a parameter of
// its name: `--by function --peak --between 1s 2s` is
// `by=function&peak=&between=1s,2s`.

import { setStatus } from './dom.js';

// The server answers only with the token of the URL it printed; it goes in a
// header, so that it stays out of the addresses of the requests.
const TOKEN = new URLSearchParams(location.search).get('token') || '';

// How long to wait before asking again a server that is still building what
// it answers from (a 503, whose text says how far it is).
const BUILDING_RETRY_MS = 250;

// The text of `/api/<endpoint>?<query>`; a refusal throws with the server's
// reason. While the server builds the trace's timeline the status line shows
// how far it is, and the request is asked again until it is answered.
export async function answerText(endpoint, query) {
  for (;;) {
    const r = await fetch('/api/' + endpoint + '?' + query.toString(), {
      headers: { Authorization: 'Bearer ' + TOKEN },
    });
    const text = await r.text();
    if (r.status === 503) {
      setStatus(text + '…');
      await new Promise((done) => setTimeout(done, BUILDING_RETRY_MS));
      continue;
    }
    if (!r.ok) throw new Error(text);
    return text;
  }
}

// A command line's options as named parameters: an option (`--name`) and
// the values after it, joined by commas (an option of two values takes them
// so); a flag has the empty value.
export function named(args) {
  const q = new URLSearchParams();
  let name = null;
  let values = [];
  const put = () => {
    if (name !== null) q.append(name, values.join(','));
  };
  for (const a of args) {
    if (a.startsWith('--')) {
      put();
      name = a.slice(2);
      values = [];
    } else if (name === null) {
      throw new Error(`${a}: a value before any option`);
    } else {
      values.push(a);
    }
  }
  put();
  return q;
}

// The answer of a memtrace trace's endpoint to a command line's options.
export async function api(endpoint, args) {
  return JSON.parse(await answerText(endpoint, named(args)));
}

// How often a page asks a followed trace whether it grew.
const FOLLOW_MS = 250;

// A trace followed while its program writes it (`--follow`, whose state
// `followed` is as `/api/features` gave it): asks every FOLLOW_MS whether it
// grew, awaits `grew(followed)` when it did (which returns false to stop) and
// calls `seen(followed)` after every answer; stops once the writer is done.
export async function follow(followed, { grew, seen }) {
  let generation = followed.generation;
  for (;;) {
    await new Promise((done) => setTimeout(done, FOLLOW_MS));
    let f;
    try {
      f = (await answerJson('features')).followed;
    } catch {
      continue;
    }
    if (!f) return;
    if (f.generation !== generation) {
      generation = f.generation;
      if ((await grew(f)) === false) return;
    }
    seen(f);
    if (!f.writing) return;
  }
}

async function answerJson(endpoint) {
  return JSON.parse(await answerText(endpoint, new URLSearchParams()));
}
