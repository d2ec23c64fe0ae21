//! The README's table of the export schema is the schema the files have: it is
//! rendered from the same description ([`tracekit_export::schema::markdown`]). On a
//! mismatch the rendering is left in `target/readme-schema.md` to paste.

#[test]
fn the_readme_documents_the_schema_the_files_have() {
    let root = tracekit_testutil::workspace_root();
    let expected = tracekit_export::schema::markdown();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    if !readme.contains(&expected) {
        let out = root.join("target/readme-schema.md");
        let _ = std::fs::write(&out, &expected);
        panic!(
            "README.md's schema section differs from the export's schema: paste {}",
            out.display()
        );
    }
}
