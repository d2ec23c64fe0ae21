-- Sites whose share of the allocated bytes grew most from the traces of the first dataset ({a}) to those of the second ({b}).
WITH site_bytes AS (
  SELECT a.dataset, l.label AS site, sum(a.estimated_bytes) AS bytes
  FROM allocations a
  JOIN backtraces b ON b.dataset = a.dataset AND b.trace_id = a.trace_id
                   AND b.backtrace_id = a.backtrace_id AND b.position = 0
  JOIN locations l ON l.dataset = b.dataset AND l.trace_id = b.trace_id AND l.location_id = b.location_id
  WHERE a.dataset IN ('{a}', '{b}')
  GROUP BY a.dataset, l.label
),
total AS (
  SELECT sum(CASE WHEN dataset = '{a}' THEN estimated_bytes ELSE 0 END) AS a,
         sum(CASE WHEN dataset = '{b}' THEN estimated_bytes ELSE 0 END) AS b
  FROM allocations
),
sites AS (
  SELECT site,
         sum(CASE WHEN dataset = '{a}' THEN bytes ELSE 0 END) AS bytes_a,
         sum(CASE WHEN dataset = '{b}' THEN bytes ELSE 0 END) AS bytes_b
  FROM site_bytes
  GROUP BY site
)
SELECT s.site,
       CAST(round(s.bytes_a) AS BIGINT) AS bytes_a,
       CAST(round(s.bytes_b) AS BIGINT) AS bytes_b,
       CASE WHEN t.a > 0 THEN s.bytes_a / t.a ELSE 0 END AS share_a,
       CASE WHEN t.b > 0 THEN s.bytes_b / t.b ELSE 0 END AS share_b,
       (CASE WHEN t.b > 0 THEN s.bytes_b / t.b ELSE 0 END)
         - (CASE WHEN t.a > 0 THEN s.bytes_a / t.a ELSE 0 END) AS share_change
FROM sites s CROSS JOIN total t
ORDER BY share_change DESC, s.site
LIMIT 20
