//! Builds the tokenizer from the metadata of a GGUF parsed from the input,
//! then encodes and decodes a few texts (and the file's `general.name`).
//! A bad vocabulary is an error, never a panic; ids stay in the vocabulary.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::Tokenizer;

const TEXTS: [&str; 3] = [
    "Hello world! 123 <s></s><|im_start|>",
    " héllo\n\n\tcafé 日本語 🦀  ",
    "",
];

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    let meta = file.metadata();
    let tok = match Tokenizer::from_gguf(meta) {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let name = meta.get_str("general.name").unwrap_or("");
    let n = tok.vocab_size();
    for text in TEXTS.iter().copied().chain([name]) {
        for (add, parse) in [(true, true), (false, false)] {
            let ids = tok.encode(text, add, parse);
            assert!(ids.iter().all(|&id| (id as usize) < n), "id out of vocab");
            let _ = tok.decode(&ids, true);
            let _ = tok.decode_bytes(&ids, false);
        }
    }
    for id in (0..n.min(64)).map(|i| i as u32) {
        let _ = tok.token_to_piece(id, true);
        let _ = (tok.token_text(id), tok.token_attrs(id), tok.is_eog(id));
    }
    let _ = tok.token_to_piece(u32::MAX, true);
});
