use mlxr_formats::gguf::GgufFile;
use mlxr_models::{ContiguousKvCache, DecoderModel, SeqChunk};
fn run(model: &DecoderModel, a: &[u32], sizes: &[usize]) -> Vec<f32> {
    let mut cache = ContiguousKvCache::new(model.config().n_layers);
    let mut pos = 0;
    let mut l = vec![];
    for &s in sizes {
        let c = &a[pos..pos + s];
        let mut seqs = [SeqChunk {
            start_pos: pos,
            len: c.len(),
            cache: &mut cache,
        }];
        l = model
            .forward(c, &mut seqs)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        pos += c.len();
    }
    l
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = DecoderModel::load(
        &GgufFile::open(&args[1]).unwrap(),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let sizes: Vec<Vec<usize>> = args[2..]
        .iter()
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    let a: Vec<u32> = (0..1000u32).map(|i| 100 + (i * 37 + 101) % 5000).collect();
    for c in sizes {
        let n: usize = c.iter().sum();
        let full = run(&model, &a, &[n]);
        let l = run(&model, &a, &c);
        let d = full
            .iter()
            .zip(&l)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        let mean = full.iter().zip(&l).map(|(x, y)| (x - y).abs()).sum::<f32>() / l.len() as f32;
        let am = |v: &[f32]| {
            v.iter()
                .enumerate()
                .fold((0, f32::MIN), |a, (i, &x)| if x > a.1 { (i, x) } else { a })
                .0
        };
        println!(
            "chunk {c:?}: max diff {d} mean {mean} argmax {} {}",
            am(&full),
            am(&l)
        );
    }
}
