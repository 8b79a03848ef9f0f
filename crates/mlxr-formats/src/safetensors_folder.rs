//! Which safetensors files hold a model folder's weights: the shards
//! `model.safetensors.index.json` lists, else `model.safetensors`, else every
//! `*.safetensors` file; and which tensors of an FP8 / bitsandbytes 4-bit
//! checkpoint are not parameters. Shared by the model loader, the registry
//! and the converter.

use std::path::Path;

/// The weights files of `dir`, relative names, each checked to exist. The
/// error is a readable sentence.
pub fn folder_weights(dir: &Path) -> Result<Vec<String>, String> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let text = std::fs::read_to_string(&index)
            .map_err(|e| format!("reading {}: {e}", index.display()))?;
        let shards = index_shards(&text)?;
        if let Some(missing) = shards.iter().find(|s| !dir.join(s).is_file()) {
            return Err(format!(
                "shard {missing} listed in {} is missing",
                index.display()
            ));
        }
        return Ok(shards);
    }
    if dir.join("model.safetensors").is_file() {
        return Ok(vec!["model.safetensors".to_string()]);
    }
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".safetensors"))
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!("{} has no *.safetensors weights", dir.display()));
    }
    Ok(found)
}

/// The shard files a `model.safetensors.index.json` lists, sorted, plain
/// file names only.
pub fn index_shards(text: &str) -> Result<Vec<String>, String> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("model.safetensors.index.json is not valid JSON: {e}"))?;
    let mut shards: Vec<String> = json["weight_map"]
        .as_object()
        .ok_or("model.safetensors.index.json has no weight_map")?
        .values()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    shards.sort();
    shards.dedup();
    if shards.is_empty() {
        return Err("model.safetensors.index.json lists no shards".to_string());
    }
    if let Some(bad) = shards
        .iter()
        .find(|s| s.contains('/') || s.contains('\\') || s.starts_with('.'))
    {
        return Err(format!("shard name '{bad}' is not a plain file name"));
    }
    Ok(shards)
}

/// Whether a tensor of an FP8 or bitsandbytes 4-bit checkpoint only serves
/// a quantized weight (its scales or quant state) rather than being a
/// parameter of its own.
pub fn is_quantization_stat(name: &str) -> bool {
    const STATS: [&str; 7] = [
        ".weight_scale_inv",
        ".weight_scale",
        ".input_scale",
        ".absmax",
        ".quant_map",
        ".nested_absmax",
        ".nested_quant_map",
    ];
    STATS.iter().any(|s| name.ends_with(s)) || name.contains(".quant_state.")
}
