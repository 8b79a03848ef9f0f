//! The profiled backend: the same logits as the backend it wraps, and each
//! op counted once per call (a decode step of SmolLM2 attends once per
//! layer).

mod common;

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;
use mlxr_models::backend::profiled::Profiled;
use mlxr_models::{DecoderModel, KvGeometry, ReferenceBackend, Session};
use mlxr_testkit::SMOLLM2;

use common::BLOCK;

#[test]
fn profiled_backend_counts_every_op_and_changes_nothing() {
    check(Profiled::new);
}

#[test]
fn host_side_profile_counts_every_op_and_changes_nothing() {
    check(Profiled::host_side);
}

fn check(wrap: fn(ReferenceBackend) -> Profiled<ReferenceBackend>) {
    let Some(path) = mlxr_testkit::model_path(SMOLLM2) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let model = DecoderModel::load_with_kernels(&file, &Device::Cpu, None).unwrap();
    let layers = model.config().n_layers;
    let kv = KvGeometry::new(model.config(), 2, BLOCK);
    let backend = || ReferenceBackend::new(kv, &Device::Cpu).unwrap();
    let mut plain = Session::new(backend(), 1, 2, BLOCK);
    let mut profiled = Session::new(wrap(backend()), 1, 2, BLOCK);

    let prompt = [1u32, 504, 3458, 28, 2015];
    let want = plain.feed(&model, &[(0, &prompt)]).unwrap().to_vec();
    let got = profiled.feed(&model, &[(0, &prompt)]).unwrap().to_vec();
    assert_eq!(got, want, "prefill logits");
    for token in [30u32, 31] {
        let want = plain.feed(&model, &[(0, &[token])]).unwrap().to_vec();
        let got = profiled.feed(&model, &[(0, &[token])]).unwrap().to_vec();
        assert_eq!(got, want, "decode logits");
    }

    let report = profiled.backend().report();
    let calls = |op: &str| report.iter().find(|r| r.op == op).map(|r| r.calls);
    assert_eq!(calls("attend 2-8 rows"), Some(layers), "{report:?}");
    assert_eq!(calls("attend 1 row"), Some(2 * layers), "{report:?}");
    assert_eq!(calls("begin_step"), Some(3));
    assert_eq!(calls("read"), Some(3));
    assert!(
        report.windows(2).all(|w| w[0].total >= w[1].total),
        "slowest first: {report:?}"
    );
    profiled.backend_mut().reset();
    assert!(profiled.backend().report().is_empty());
}
