//! The layer is linked into the programs it traces, so it takes the FXT writer
//! alone: its own dependency on `tracekit-fxt` turns off the default features
//! (the reader, `check`, `dump`, `chrome`, `stats`) and asks for `write` only.
//! What is checked is what cargo resolves for this package's normal
//! dependencies on its own, not the workspace's unified features.

#[test]
fn the_layer_takes_the_fxt_writer_without_the_reader() {
    let features = tracekit_testutil::resolved_features(
        env!("CARGO_MANIFEST_DIR"),
        "tracekit-tracing",
        "tracekit-fxt",
    );
    assert_eq!(features, ["write"]);
}
