//! Fuchsia trace format (FXT) reader and writer.
