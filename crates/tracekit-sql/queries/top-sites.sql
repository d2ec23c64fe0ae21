-- Allocation sites across all traces: estimated bytes allocated, samples, sampled allocations and the number of traces each appears in.
SELECT l.label AS site,
       CAST(round(sum(a.estimated_bytes)) AS BIGINT) AS bytes,
       sum(a.nsamples) AS samples,
       count(*) AS allocations,
       count(DISTINCT a.trace_id) AS traces
FROM allocations a
JOIN backtraces b ON b.trace_id = a.trace_id AND b.backtrace_id = a.backtrace_id AND b.position = 0
JOIN locations l ON l.trace_id = b.trace_id AND l.location_id = b.location_id
GROUP BY l.label
ORDER BY bytes DESC, site
LIMIT 20
