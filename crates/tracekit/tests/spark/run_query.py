"""Run one Spark SQL query over tracekit Parquet datasets; print the result as JSON.

An independent reader for the tests: `tracekit export ... -o DIR` writes
DIR/<table>/<trace_id>.parquet, and this script lets Apache Spark answer a query
over such folders.

    python run_query.py QUERY.sql [LABEL=]DIR [[LABEL=]DIR ...]

Each table below becomes a temporary view: the UNION ALL over the DIRs that have
that table's folder, with a string column `dataset` (LABEL, or the DIR's base
name) appended last. `{a}` and `{b}` in the SQL are replaced by the labels of
the first and second DIR. The result is printed to stdout as one JSON array of
objects (column -> value); everything else (Spark's logs, errors) goes to stderr,
and errors exit with status 1.
"""

import decimal
import json
import os
import re
import sys
import tempfile
import time

TABLES = ["traces", "allocations", "backtraces", "locations", "slices", "instants", "counters"]


def parse_args(argv):
    if len(argv) < 2:
        sys.exit("usage: run_query.py QUERY.sql [LABEL=]DIR [[LABEL=]DIR ...]")
    with open(argv[0]) as f:
        lines = [l for l in f.read().splitlines() if not l.lstrip().startswith("--")]
    sql = "\n".join(lines).strip().rstrip(";").strip()
    dirs = []
    for arg in argv[1:]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)=(.+)", arg)
        label, path = m.groups() if m else (os.path.basename(os.path.normpath(arg)), arg)
        if not os.path.isdir(path):
            raise ValueError(f"not a directory: {path}")
        dirs.append((label, path))
    for key, i in (("{a}", 0), ("{b}", 1)):
        if key in sql:
            if i >= len(dirs):
                raise ValueError(f"the query uses {key} but only {len(dirs)} DIR(s) were given")
            sql = sql.replace(key, dirs[i][0])
    return sql, dirs


def to_json(value):
    if isinstance(value, decimal.Decimal):  # e.g. DECIMAL results of sum/avg
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    return str(value)  # dates, timestamps, anything else json cannot write


def main():
    sql, dirs = parse_args(sys.argv[1:])
    # Spark's JVM inherits fd 1: point that at stderr, and keep a copy of the real
    # stdout for the JSON alone.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # Spark's scratch files and (empty) warehouse folder go here, not into the cwd.
    with tempfile.TemporaryDirectory(prefix="tracekit-spark-", ignore_cleanup_errors=True) as tmp:
        rows = query(sql, dirs, tmp)
    json.dump(rows, out, default=to_json)
    out.write("\n")
    out.close()


def query(sql, dirs, tmp):
    os.environ["TZ"] = "UTC"  # Python-side timestamps, as spark.sql.session.timeZone
    time.tzset()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession, functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tracekit-run-query")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", os.path.join(tmp, "warehouse"))
        .config("spark.local.dir", tmp)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for table in TABLES:
            parts = [
                spark.read.option("mergeSchema", "true")
                .parquet(os.path.join(path, table))
                .withColumn("dataset", F.lit(label))
                for label, path in dirs
                if os.path.isdir(os.path.join(path, table))
            ]
            if parts:
                view = parts[0]
                for part in parts[1:]:
                    view = view.unionByName(part, allowMissingColumns=True)
                view.createOrReplaceTempView(table)
        return [row.asDict(recursive=True) for row in spark.sql(sql).collect()]
    finally:
        spark.stop()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # Spark's AnalysisException etc.: message only, no traceback
        print(f"run_query.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
