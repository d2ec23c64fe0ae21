-- Allocation sites across all traces, named as `tracekit memtrace top` names them: estimated bytes allocated, samples, sampled allocations and the number of traces each appears in.
SELECT a.site AS site,
       CAST(round(sum(a.estimated_bytes)) AS BIGINT) AS bytes,
       sum(a.nsamples) AS samples,
       count(*) AS allocations,
       count(DISTINCT a.trace_id) AS traces
FROM allocations a
GROUP BY a.site
ORDER BY bytes DESC, site
LIMIT 20
