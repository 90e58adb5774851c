//! The fuzzer (`neardup-fuzz`) replays the regression corpus in `fuzz/corpus/` and a
//! fixed number of generated inputs: no panic in the JSON Lines reader, HTML extraction or
//! the text pipeline.

use std::process::Command;

#[test]
fn the_corpus_and_a_fixed_budget_of_generated_inputs_run_without_panics() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = format!("{}/corpus", env!("CARGO_MANIFEST_DIR"));
    let crashes = dir.path().join("crashes");
    let run = Command::new(env!("CARGO_BIN_EXE_neardup-fuzz"))
        .args([
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
        ])
        .output()
        .expect("the neardup-fuzz binary runs");
    let (out, err) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{out}{err}");
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
