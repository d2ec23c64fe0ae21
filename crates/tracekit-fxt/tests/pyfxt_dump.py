"""Parse an FXT file with PyPI fxt and print its records as canonical JSON.

Used by tests/pyfxt.rs. Doubles are printed as their IEEE-754 bits and byte payloads
as hex, so that the comparison is exact.
"""

import dataclasses
import enum
import json
import struct
import sys

from fxt.reader import parse_records


def conv(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return {"f64": struct.unpack("<Q", struct.pack("<d", v))[0]}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return {k: conv(x) for k, x in v.items()}
    if isinstance(v, list):
        return [conv(x) for x in v]
    if dataclasses.is_dataclass(v):
        out = {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        # Blob and kernel object records have a field called `type`; keep the
        # record's class name as the tag.
        if "type" in out:
            out["type_"] = out.pop("type")
        out["type"] = type(v).__name__
        return out
    raise TypeError(type(v))


def main():
    with open(sys.argv[1], "rb") as f:
        result = parse_records(f)
    if result.had_unexpected_eof:
        print(result.eof_error, file=sys.stderr)
        sys.exit(1)
    out = {
        str(pid): {
            "name": state.name,
            "events": [int(e) for e in state.events],
            "records": conv(state.records),
        }
        for pid, state in result.records_by_provider.items()
    }
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
