// The server's answers. Each endpoint answers what `tracekit memtrace
// <endpoint> --json` prints for the same options, given as `arg` parameters.

// The server answers only with the token of the URL it printed; it goes in a
// header, so that it stays out of the addresses of the requests.
const TOKEN = new URLSearchParams(location.search).get('token') || '';

export async function api(endpoint, args) {
  const q = new URLSearchParams();
  for (const a of args) q.append('arg', a);
  const r = await fetch('/api/' + endpoint + '?' + q.toString(), {
    headers: { Authorization: 'Bearer ' + TOKEN },
  });
  const text = await r.text();
  if (!r.ok) throw new Error(text);
  return JSON.parse(text);
}
