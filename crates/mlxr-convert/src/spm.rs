//! The `tokenizer.*` metadata of a SentencePiece vocabulary (`tokenizer.model`),
//! as convert_hf_to_gguf.py's SentencePiece path writes it: every piece with
//! its score and type, `added_tokens.json` and tokenizer_config.json's
//! `added_tokens_decoder` laid over them, `[PAD{i}]` for ids the model does not
//! fill, then the special tokens as for BPE vocabularies.

use std::path::Path;

use serde_json::{Map, Value};

use crate::hf_folder::read_json_object;
use crate::kvs::Kvs;
use crate::vocab::{looks_special, special_tokens, CONTROL, NORMAL, UNUSED, USER_DEFINED};
use crate::ConvertError;

const UNKNOWN: i32 = 2;
const BYTE: i32 = 6;

fn err(message: String) -> ConvertError {
    ConvertError::Input(message)
}

/// One `ModelProto.pieces` entry: text, score and SentencePiece type
/// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub text: String,
    pub score: f32,
    pub kind: u64,
}

/// A protobuf reader over one message's bytes.
struct Proto<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Proto<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    /// The next field: its number and, for length-delimited and 32-bit
    /// fields, its bytes; for varints, the value in `.2`.
    fn field(&mut self) -> Option<(u64, &'a [u8], u64)> {
        let key = self.varint()?;
        match key & 7 {
            0 => Some((key >> 3, &[][..], self.varint()?)),
            1 => Some((key >> 3, self.take(8)?, 0)),
            2 => {
                let n = usize::try_from(self.varint()?).ok()?;
                Some((key >> 3, self.take(n)?, 0))
            }
            5 => Some((key >> 3, self.take(4)?, 0)),
            _ => None,
        }
    }
}

/// The pieces of a serialized `ModelProto`.
pub fn read_pieces(bytes: &[u8]) -> Result<Vec<Piece>, String> {
    let mut model = Proto { bytes, at: 0 };
    let mut pieces = Vec::new();
    while model.at < bytes.len() {
        let (number, body, _) = model
            .field()
            .ok_or("not a SentencePiece model (bad protobuf)")?;
        if number != 1 {
            continue;
        }
        let mut p = Proto { bytes: body, at: 0 };
        let mut piece = Piece {
            text: String::new(),
            score: 0.0,
            kind: 1,
        };
        while p.at < body.len() {
            let (n, b, v) = p.field().ok_or("a SentencePiece piece is malformed")?;
            match n {
                1 => {
                    piece.text =
                        String::from_utf8(b.to_vec()).map_err(|_| "a piece is not UTF-8")?
                }
                2 if b.len() == 4 => piece.score = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                3 => piece.kind = v,
                _ => {}
            }
        }
        pieces.push(piece);
    }
    if pieces.is_empty() {
        return Err("the SentencePiece model has no pieces".into());
    }
    Ok(pieces)
}

/// Writes the vocabulary keys of the folder's `tokenizer.model`.
pub fn write_spm_vocab(
    dir: &Path,
    vocab_size: Option<u32>,
    kvs: &mut Kvs,
) -> Result<(), ConvertError> {
    let path = dir.join("tokenizer.model");
    let bytes =
        std::fs::read(&path).map_err(|e| err(format!("reading {}: {e}", path.display())))?;
    let pieces = read_pieces(&bytes).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let n = vocab_size.map(|v| v as usize).unwrap_or(pieces.len());
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; n];
    let mut types = vec![UNUSED; n];
    for (id, p) in pieces.iter().enumerate().take(n) {
        tokens[id] = p.text.clone();
        scores[id] = p.score;
        types[id] = match p.kind {
            2 => UNKNOWN,
            3 => CONTROL,
            5 => UNUSED,
            6 => BYTE,
            _ => NORMAL,
        };
    }
    if let Some(added) = read_json_object(&dir.join("added_tokens.json"))? {
        for (text, id) in added {
            let id = id
                .as_u64()
                .ok_or_else(|| err(format!("added_tokens.json: {text:?} has no numeric id")))?
                as usize;
            if id < n {
                tokens[id] = text;
                scores[id] = -1000.0;
                types[id] = USER_DEFINED;
            }
        }
    }
    if let Some(cfg) = read_json_object(&dir.join("tokenizer_config.json"))? {
        if let Some(decoder) = cfg.get("added_tokens_decoder").and_then(Value::as_object) {
            for (id, data) in decoder {
                let id: usize = id
                    .parse()
                    .map_err(|_| err(format!("added_tokens_decoder id {id:?} is not a number")))?;
                let text = data
                    .get("content")
                    .and_then(Value::as_str)
                    .ok_or_else(|| err(format!("added_tokens_decoder {id} has no content")))?;
                if id >= n {
                    continue;
                }
                let special = data
                    .get("special")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if special || looks_special(text) {
                    tokens[id] = text.to_string();
                    types[id] = CONTROL;
                } else {
                    tokens[id] = text.replace('\u{2581}', " ");
                    types[id] = USER_DEFINED;
                }
                scores[id] = -1000.0;
            }
        }
    }
    kvs.set("tokenizer.ggml.model", "llama");
    kvs.set("tokenizer.ggml.pre", "default");
    kvs.set("tokenizer.ggml.tokens", tokens);
    kvs.set("tokenizer.ggml.scores", scores);
    kvs.set("tokenizer.ggml.token_type", types);
    // Special tokens as gguf-py's SpecialVocab finds them (no merges).
    let tokenizer = read_json_object(&dir.join("tokenizer.json"))?.unwrap_or_default();
    let added: Vec<&Map<String, Value>> = tokenizer
        .get("added_tokens")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    special_tokens(dir, &tokenizer, &added, n as u64, kvs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn piece(text: &str, score: f32, kind: Option<u64>) -> Vec<u8> {
        let mut p = vec![0x0a];
        varint(text.len() as u64, &mut p);
        p.extend_from_slice(text.as_bytes());
        p.push(0x15);
        p.extend_from_slice(&score.to_le_bytes());
        if let Some(k) = kind {
            p.push(0x18);
            varint(k, &mut p);
        }
        let mut m = vec![0x0a];
        varint(p.len() as u64, &mut m);
        m.extend(p);
        m
    }

    #[test]
    fn pieces_are_read_from_the_protobuf() {
        let mut model = piece("<unk>", 0.0, Some(2));
        model.extend(piece("\u{2581}the", -1.5, None));
        // an unrelated field (trainer_spec, 2) is skipped
        model.extend([0x12, 0x02, 0x08, 0x01]);
        model.extend(piece("<0x0A>", 0.0, Some(6)));
        let p = read_pieces(&model).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(
            p[0],
            Piece {
                text: "<unk>".into(),
                score: 0.0,
                kind: 2
            }
        );
        assert_eq!(
            p[1],
            Piece {
                text: "\u{2581}the".into(),
                score: -1.5,
                kind: 1
            }
        );
        assert_eq!(p[2].kind, 6);
        assert!(read_pieces(&model[..model.len() - 3]).is_err());
        assert!(read_pieces(b"").is_err());
    }
}
