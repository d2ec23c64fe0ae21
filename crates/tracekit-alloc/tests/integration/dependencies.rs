//! The tracer is linked into the programs it traces, so it takes the memtrace
//! writer alone: its own dependency on `tracekit-memtrace` turns off the default
//! features (the reader, dumps, synthetic traces) and asks for `write` only. In
//! a workspace build cargo unifies features, so what is checked is what cargo
//! resolves for this package's normal dependencies on its own.

#[test]
fn the_tracer_takes_the_memtrace_writer_without_the_reader() {
    let features = tracekit_testutil::resolved_features(
        env!("CARGO_MANIFEST_DIR"),
        "tracekit-alloc",
        "tracekit-memtrace",
    );
    assert_eq!(features, ["write"]);
}
