//! Pull sources under the default policy: no paths on this machine, no
//! plain http (but the configured Hub endpoint), checked on every redirect.

mod common;

use common::{files_in, start_redirector, tiny_gguf, write_file, TestServer};
use mlxr_registry::{ModelName, PullPolicy, PullSource, Registry, RegistryError};

fn refused(err: &RegistryError, hint: &str) {
    assert!(
        matches!(err, RegistryError::PullRefused { .. }),
        "not refused: {err}"
    );
    assert!(err.to_string().contains(hint), "{err}");
}

#[test]
fn local_paths_need_allow_local() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.gguf");
    write_file(&file, &tiny_gguf(1));
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();

    // An existing and a missing path get the same answer.
    for spec in [file.to_str().unwrap(), "/no/such/model.gguf", "./x", "~/m"] {
        let err = reg.resolve_pull(spec).unwrap_err();
        refused(&err, "--allow-local-pulls");
        refused(&err, "mlxr pull");
    }
    let err = reg.resolve_pull("nosuchmodel").unwrap_err();
    assert!(matches!(err, RegistryError::UnknownSource { .. }), "{err}");
    // The registry refuses the source itself too.
    let err = reg
        .pull(
            &PullSource::Local(file.clone()),
            &ModelName::parse("tiny").unwrap(),
            &mut |_| {},
        )
        .unwrap_err();
    refused(&err, "--allow-local-pulls");
    assert!(reg.list().unwrap().is_empty());
    assert!(files_in(&home.path().join("blobs")).is_empty());

    let reg = reg.with_pull_policy(PullPolicy {
        allow_local: true,
        ..PullPolicy::default()
    });
    let (source, name) = reg.resolve_pull(file.to_str().unwrap()).unwrap();
    assert_eq!(source, PullSource::Local(file));
    reg.pull(&source, &name, &mut |_| {}).unwrap();
    assert!(reg.resolve_pull("/no/such/model.gguf").is_err());
}

#[test]
fn plain_http_needs_allow_insecure() {
    let server = TestServer::start(tiny_gguf(2), 0);
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let err = reg.resolve_pull(&server.url).unwrap_err();
    refused(&err, "--allow-insecure-pulls");
    assert!(server.ranges.lock().unwrap().is_empty(), "nothing fetched");

    let reg = reg.with_pull_policy(PullPolicy {
        allow_insecure: true,
        ..PullPolicy::default()
    });
    let (source, name) = reg.resolve_pull(&server.url).unwrap();
    reg.pull(&source, &name, &mut |_| {}).unwrap();
}

#[test]
fn every_redirect_hop_is_checked() {
    let target = TestServer::start(tiny_gguf(3), 0);
    let hub = start_redirector(target.url.clone());
    let home = tempfile::tempdir().unwrap();
    // The Hub endpoint is trusted over http; where it redirects is not.
    let reg = Registry::open(home.path()).unwrap().with_hf_endpoint(&hub);
    let (source, name) = reg
        .resolve_pull(&format!("{hub}/org/repo/resolve/main/m.gguf"))
        .unwrap();
    let err = reg.pull(&source, &name, &mut |_| {}).unwrap_err();
    refused(&err, "--allow-insecure-pulls");
    assert!(err.to_string().contains(&target.url), "{err}");
    assert!(
        target.ranges.lock().unwrap().is_empty(),
        "target not fetched"
    );
    assert!(reg.list().unwrap().is_empty());

    let reg = reg.with_pull_policy(PullPolicy {
        allow_insecure: true,
        ..PullPolicy::default()
    });
    let rec = reg.pull(&source, &name, &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(rec.model_path).unwrap(), tiny_gguf(3));
}
