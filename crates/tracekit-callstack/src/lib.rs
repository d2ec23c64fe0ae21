//! Call-stack timelines from `perf script` branch traces (magic-trace's trace writer).
