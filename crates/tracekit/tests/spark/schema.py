"""Print the Arrow schema and row count of each table of a tracekit Parquet dataset.

An independent reader for the tests (pyarrow only, no Spark):

    python schema.py DIR

DIR is a folder written by `tracekit export ... -o DIR` (DIR/<table>/*.parquet).
Prints one JSON object: for each table folder, the schema of the whole folder read
as one dataset, as a list of [column name, str(type), nullable]; plus "rows":
{table: number of rows}.
"""

import json
import os
import sys

import pyarrow.parquet as pq


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: schema.py DIR")
    root = sys.argv[1]
    out, rows = {}, {}
    for table in sorted(os.listdir(root)):
        path = os.path.join(root, table)
        if not os.path.isdir(path):
            continue
        data = pq.read_table(path)
        out[table] = [[f.name, str(f.type), f.nullable] for f in data.schema]
        rows[table] = data.num_rows
    out["rows"] = rows
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
