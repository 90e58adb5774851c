//! The fuzzer (`neardup bench fuzz`) replays the regression corpus in `fuzz/corpus/` and a
//! fixed number of generated inputs: no panic in the JSON Lines reader, HTML extraction or
//! the text pipeline.

mod common;

#[test]
fn the_corpus_and_a_fixed_budget_of_generated_inputs_run_without_panics() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = format!("{}/fuzz/corpus", env!("CARGO_MANIFEST_DIR"));
    let crashes = dir.path().join("crashes");
    let (code, out, err) = common::neardup(
        &[
            "bench",
            "fuzz",
            "--execs",
            "1500",
            "--time",
            "1h",
            "--seed",
            "14",
            "--corpus",
            &corpus,
            "--crashes",
            crashes.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("1500 generated") && out.contains("0 panics"),
        "{out}"
    );
    assert!(
        !out.contains(" 0 corpus inputs"),
        "the corpus was replayed: {out}"
    );
    assert!(!crashes.exists());
}
