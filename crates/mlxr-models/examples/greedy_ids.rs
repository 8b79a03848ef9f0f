//! Greedy continuation of raw token ids: `greedy_ids MODEL.gguf N ID...`.
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{ContiguousKvCache, DecoderModel, SeqChunk};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let file = GgufFile::open(&args[1])?;
    let n: usize = args[2].parse()?;
    let mut ids: Vec<u32> = args[3..].iter().map(|s| s.parse().unwrap()).collect();
    let t = std::time::Instant::now();
    let model = DecoderModel::load(&file, &candle_core::Device::Cpu)?;
    eprintln!("load {:?}", t.elapsed());
    let mut cache = ContiguousKvCache::new(model.config().n_layers);
    let mut pos = 0;
    let mut chunk = ids.clone();
    let t = std::time::Instant::now();
    for _ in 0..n {
        let mut seqs = [SeqChunk {
            start_pos: pos,
            len: chunk.len(),
            cache: &mut cache,
        }];
        let logits = model
            .forward(&chunk, &mut seqs)?
            .squeeze(0)?
            .to_vec1::<f32>()?;
        pos += chunk.len();
        let (best, _) =
            logits
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |a, (i, &v)| if v > a.1 { (i, v) } else { a });
        ids.push(best as u32);
        chunk = vec![best as u32];
    }
    eprintln!("gen {:?}", t.elapsed());
    println!("{:?}", ids);
    Ok(())
}
