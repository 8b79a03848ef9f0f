use anyhow::Result;
use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::Tokenizer;
use serde_json::json;

use crate::cli::TokenizeArgs;

pub fn tokenize(args: TokenizeArgs) -> Result<()> {
    let path = args.model.display();
    let tokenizer = if args.model.is_dir() {
        Tokenizer::from_hf_dir(&args.model)
    } else {
        let file = GgufFile::open(&args.model).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
        Tokenizer::from_gguf(file.metadata())
    }
    .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let ids = tokenizer.encode(&args.text, true, true);
    let out = if args.pieces {
        json!(ids
            .iter()
            .map(|&id| json!({
                "id": id,
                "piece": String::from_utf8_lossy(&tokenizer.token_to_piece(id, true)),
            }))
            .collect::<Vec<_>>())
    } else {
        json!(ids)
    };
    println!("{out}");
    Ok(())
}
