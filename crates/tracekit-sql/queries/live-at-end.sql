-- Heap live at the end of the traces, by executable: estimated bytes of the sampled objects never collected, in all and per trace.
SELECT t.executable,
       count(DISTINCT t.trace_id) AS traces,
       CAST(round(sum(a.estimated_bytes)) AS BIGINT) AS live_bytes,
       CAST(round(sum(a.estimated_bytes) / count(DISTINCT t.trace_id)) AS BIGINT) AS live_bytes_per_trace,
       count(*) AS live_allocations
FROM allocations a
JOIN traces t ON t.trace_id = a.trace_id
WHERE a.collect_time_us IS NULL
GROUP BY t.executable
ORDER BY live_bytes DESC, t.executable
