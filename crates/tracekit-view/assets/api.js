// The server's answers, for both pages. A memtrace trace's endpoints answer
// what `tracekit memtrace <endpoint> --json` prints for the same options,
// given as `arg` parameters; a timeline's take named parameters.

// The server answers only with the token of the URL it printed; it goes in a
// header, so that it stays out of the addresses of the requests.
const TOKEN = new URLSearchParams(location.search).get('token') || '';

// The text of `/api/<endpoint>?<query>`; a refusal throws with the server's
// reason.
export async function answerText(endpoint, query) {
  const r = await fetch('/api/' + endpoint + '?' + query.toString(), {
    headers: { Authorization: 'Bearer ' + TOKEN },
  });
  const text = await r.text();
  if (!r.ok) throw new Error(text);
  return text;
}

export async function api(endpoint, args) {
  const q = new URLSearchParams();
  for (const a of args) q.append('arg', a);
  return JSON.parse(await answerText(endpoint, q));
}
