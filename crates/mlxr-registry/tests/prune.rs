//! Pruning at daemon start: blob files no model references and older than
//! an hour are removed; referenced, recent, partial and foreign files stay.

mod common;

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use common::{files_in, tiny_gguf, write_file};
use mlxr_registry::{Digest, ModelName, NewModel, Registry, PRUNE_MIN_AGE};

/// Sets the modification time of a file (or folder) to `PRUNE_MIN_AGE`
/// plus a minute ago.
fn age(path: &Path) {
    let then = SystemTime::now() - PRUNE_MIN_AGE - Duration::from_secs(60);
    File::open(path).unwrap().set_modified(then).unwrap();
}

fn blobs_dir(home: &Path) -> std::path::PathBuf {
    home.join("blobs")
}

#[test]
fn an_old_unreferenced_blob_is_removed() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let d = reg.put_blob(&mut b"orphan".as_slice(), None).unwrap();
    age(&reg.blob_path(&d));

    assert_eq!(reg.prune_unreferenced_blobs().unwrap(), vec![d.clone()]);
    assert!(!reg.has_blob(&d));
    assert!(files_in(&blobs_dir(home.path())).is_empty());
    // Nothing left to do the second time.
    assert!(reg.prune_unreferenced_blobs().unwrap().is_empty());
}

#[test]
fn a_referenced_blob_stays() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let gguf = tiny_gguf(1);
    let blob = reg.put_blob(&mut gguf.as_slice(), None).unwrap();
    let name = ModelName::parse("tiny").unwrap();
    reg.create(&name, NewModel::from_blob(blob.clone()))
        .unwrap();
    age(&reg.blob_path(&blob));

    assert!(reg.prune_unreferenced_blobs().unwrap().is_empty());
    assert!(reg.has_blob(&blob));
    let record = reg.get(&name).unwrap().expect("the model is still there");
    assert!(record.model_path.is_file());
}

#[test]
fn a_recent_unreferenced_blob_stays() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let d = reg
        .put_blob(&mut b"just uploaded".as_slice(), None)
        .unwrap();

    assert!(reg.prune_unreferenced_blobs().unwrap().is_empty());
    assert!(reg.has_blob(&d));
}

#[test]
fn storing_an_old_orphan_again_makes_it_recent() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let d = reg
        .put_blob(&mut b"uploaded twice".as_slice(), None)
        .unwrap();
    age(&reg.blob_path(&d));
    // The same upload again (about to be used by a create) keeps the file
    // but refreshes its time.
    assert_eq!(
        reg.put_blob(&mut b"uploaded twice".as_slice(), Some(&d))
            .unwrap(),
        d
    );

    assert!(reg.prune_unreferenced_blobs().unwrap().is_empty());
    assert!(reg.has_blob(&d));
}

#[test]
fn partial_and_unrelated_files_stay() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let dir = blobs_dir(home.path());
    let orphan = reg.put_blob(&mut b"orphan".as_slice(), None).unwrap();
    age(&reg.blob_path(&orphan));

    let hex = Digest::of_bytes(b"elsewhere").hex().to_string();
    let kept = [
        format!("sha256-{hex}-partial"),
        format!("sha256-{}", hex.to_uppercase()),
        format!("sha256-{}", &hex[..63]),
        format!("sha256-{hex}0"),
        format!("sha256:{hex}"),
        format!("tmp-{hex}"),
        hex.clone(),
        "notes.txt".to_string(),
    ];
    for name in &kept {
        write_file(&dir.join(name), b"not a blob of ours");
        age(&dir.join(name));
    }
    // A folder under a blob name is not a blob file either.
    let folder = Digest::of_bytes(b"a folder").file_name();
    std::fs::create_dir(dir.join(&folder)).unwrap();
    age(&dir.join(&folder));

    assert_eq!(reg.prune_unreferenced_blobs().unwrap(), vec![orphan]);
    let mut expected: Vec<String> = kept.to_vec();
    expected.push(folder);
    expected.sort();
    assert_eq!(files_in(&dir), expected);
}
