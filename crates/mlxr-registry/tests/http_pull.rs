//! URL pulls against a local HTTP server: interrupted transfers resume with
//! `Range`, finished downloads are not repeated, failures leave no model.

mod common;

use std::sync::atomic::Ordering;
use std::sync::mpsc;

use common::{files_in, tiny_gguf, TestServer};
use mlxr_registry::{
    Digest, ModelName, PullPolicy, PullProgress, PullSource, Registry, RegistryError,
};

/// A GGUF padded to 3 MiB so the transfer has several chunks.
fn big_gguf() -> Vec<u8> {
    let mut bytes = tiny_gguf(9);
    bytes.extend((0..(3usize << 20)).map(|i| (i % 251) as u8));
    bytes
}

#[test]
fn interrupted_download_resumes_with_range() {
    let body = big_gguf();
    let cut = 1_500_000;
    let server = TestServer::start(body.clone(), cut);
    server.failures_left.store(1, Ordering::SeqCst);

    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let (source, name) = Registry::resolve_source(&server.url).unwrap();
    assert_eq!(source, PullSource::Url(server.url.clone()));
    assert_eq!(name.to_string(), "tiny-model:latest");

    // First attempt: the server drops the connection part-way.
    let err = reg.pull(&source, &name, &mut |_| {}).unwrap_err();
    assert!(matches!(err, RegistryError::Http { .. }), "{err}");
    assert!(reg.get(&name).unwrap().is_none());
    let blobs = files_in(&home.path().join("blobs"));
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    assert!(
        blobs[0].ends_with("-partial"),
        "only the partial file: {blobs:?}"
    );
    let partial_len = std::fs::metadata(home.path().join("blobs").join(&blobs[0]))
        .unwrap()
        .len();
    assert_eq!(partial_len, cut as u64);

    // Reopening (a daemon restart) keeps the partial file.
    drop(reg);
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);

    // Second attempt resumes from the partial file.
    let mut events: Vec<PullProgress> = Vec::new();
    let rec = reg.pull(&source, &name, &mut |p| events.push(p)).unwrap();
    assert_eq!(rec.model_blob, Digest::of_bytes(&body));
    assert_eq!(std::fs::read(&rec.model_path).unwrap(), body);
    let ranges = server.ranges.lock().unwrap().clone();
    assert_eq!(ranges, vec![None, Some(format!("bytes={cut}-"))]);
    let first_bytes = events.iter().find(|p| p.completed.is_some()).unwrap();
    assert_eq!(
        first_bytes.completed,
        Some(cut as u64),
        "progress starts at the resume offset"
    );
    assert_eq!(first_bytes.total, Some(body.len() as u64));
    assert_eq!(events.last().unwrap().status, "success");
    assert_eq!(
        files_in(&home.path().join("blobs")),
        vec![rec.model_blob.file_name()],
        "the partial file became the blob"
    );

    // A third pull does not download again.
    let rec2 = reg
        .pull(&source, &ModelName::parse("again").unwrap(), &mut |_| {})
        .unwrap();
    assert_eq!(rec2.model_blob, rec.model_blob);
    assert_eq!(server.ranges.lock().unwrap().len(), 2);
}

/// Two pulls of one URL at once share one partial file: the second must not
/// write it while the first does (it truncated the file to the length it
/// saw and wrote the same offsets, and the first to finish renamed the file
/// into a blob the other was still writing). It waits for the first, then
/// finds the blob stored.
#[test]
fn concurrent_pulls_of_one_url_do_not_mix_their_bytes() {
    let body = big_gguf();
    let server = TestServer::start(body.clone(), 100_000);
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let source = PullSource::Url(server.url.clone());
    let (second_started, started) = mpsc::channel::<PullProgress>();

    std::thread::scope(|scope| {
        let mut second = None;
        let mut first_progress = |p: PullProgress| {
            if p.completed.unwrap_or(0) > 0 && second.is_none() {
                // Mid-transfer: start the second pull (its transfer, if it
                // makes one, is cut short) and let it get going.
                server.failures_left.store(1, Ordering::SeqCst);
                let (reg, source, tx) = (&reg, &source, second_started.clone());
                second = Some(scope.spawn(move || {
                    let mut tx = Some(tx);
                    let name = ModelName::parse("second").unwrap();
                    reg.pull(source, &name, &mut |p| {
                        if p.status != "pulling manifest" {
                            if let Some(tx) = tx.take() {
                                tx.send(p).unwrap();
                            }
                        }
                    })
                }));
                let seen = started.recv().unwrap();
                assert!(
                    seen.completed.is_none(),
                    "the second pull started writing the first one's partial file: {seen:?}"
                );
            }
        };
        let first = reg
            .pull(
                &source,
                &ModelName::parse("first").unwrap(),
                &mut first_progress,
            )
            .unwrap();
        assert_eq!(std::fs::read(&first.model_path).unwrap(), body);
        let second = second
            .expect("the first pull reported bytes")
            .join()
            .unwrap();
        assert_eq!(second.unwrap().model_blob, first.model_blob);
    });
    assert_eq!(server.ranges.lock().unwrap().len(), 1, "one download");
    assert_eq!(
        files_in(&home.path().join("blobs")),
        vec![Digest::of_bytes(&body).file_name()]
    );
}

#[test]
fn server_ignoring_range_restarts_cleanly() {
    let body = big_gguf();
    let server = TestServer::start(body.clone(), 700_000);
    server.failures_left.store(1, Ordering::SeqCst);
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let source = PullSource::Url(server.url.clone());
    let name = ModelName::parse("restart").unwrap();
    assert!(reg.pull(&source, &name, &mut |_| {}).is_err());

    // Corrupt the partial file so resuming would give the wrong bytes: the
    // digest is computed over partial + rest, so the model is still exactly
    // what was downloaded; here we make the partial longer than the file to
    // force a 416 and a clean restart.
    let blobs_dir = home.path().join("blobs");
    let partial = blobs_dir.join(&files_in(&blobs_dir)[0]);
    std::fs::write(&partial, vec![0u8; body.len() + 10]).unwrap();
    let rec = reg.pull(&source, &name, &mut |_| {}).unwrap();
    assert_eq!(rec.model_blob, Digest::of_bytes(&body));
    let ranges = server.ranges.lock().unwrap().clone();
    assert_eq!(ranges.len(), 3);
    assert_eq!(ranges[2], None, "restarted without Range after 416");
}

#[test]
fn missing_url_and_non_gguf_leave_nothing() {
    let server = TestServer::start(b"plain text, not a model".to_vec(), 0);
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path())
        .unwrap()
        .with_pull_policy(PullPolicy::ALLOW_ALL);
    let name = ModelName::parse("bad").unwrap();

    let missing = PullSource::Url(server.url.replace("tiny-model", "nothing"));
    let err = reg.pull(&missing, &name, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");

    let err = reg
        .pull(&PullSource::Url(server.url.clone()), &name, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, RegistryError::InvalidModel { .. }), "{err}");
    assert!(reg.list().unwrap().is_empty());
    assert!(files_in(&home.path().join("blobs")).is_empty());
}
