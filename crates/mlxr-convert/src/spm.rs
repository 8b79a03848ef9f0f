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

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
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

fn put_bytes(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
    put_varint(field << 3 | 2, out);
    put_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn put_int(field: u64, v: i64, out: &mut Vec<u8>) {
    put_varint(field << 3, out);
    put_varint(v as u64, out);
}

/// A `tokenizer.model` (SentencePiece `ModelProto`, BPE) for a GGUF
/// SentencePiece vocabulary: its pieces, scores and types (the unknown token
/// as UNKNOWN, which SentencePiece requires), a trainer spec naming the
/// special ids, and a normalizer that leaves text alone as llama.cpp does
/// (identity, the GGUF's dummy-prefix flag, whitespace kept).
pub fn model_proto(meta: &mlxr_formats::gguf::Metadata) -> Result<Vec<u8>, ConvertError> {
    let tokens = meta.get_str_array("tokenizer.ggml.tokens")?;
    let types = meta.get_i32_array("tokenizer.ggml.token_type")?;
    let scores = meta.get_f32_array("tokenizer.ggml.scores")?;
    if types.len() != tokens.len() || scores.len() != tokens.len() {
        return Err(err(
            "the GGUF's tokens, scores and token types differ in length".into(),
        ));
    }
    let id = |k: &str| -> Result<i64, ConvertError> {
        Ok(meta
            .opt_u32(&format!("tokenizer.ggml.{k}_token_id"))?
            .map_or(-1, i64::from))
    };
    // SentencePiece needs exactly one UNKNOWN piece: the GGUF's unknown token,
    // else its first UNKNOWN-typed one, else "<unk>", else id 0.
    let unk = match id("unknown")? {
        -1 => types
            .iter()
            .position(|&t| t == UNKNOWN)
            .or_else(|| tokens.iter().position(|t| t == "<unk>"))
            .unwrap_or(0) as i64,
        known => known,
    };
    let mut out = Vec::new();
    for (i, ((text, &ty), &score)) in tokens.iter().zip(&types).zip(scores).enumerate() {
        let kind = if i as i64 == unk {
            2
        } else {
            match ty {
                2..=6 => ty as u64,
                _ => 1,
            }
        };
        let mut p = Vec::new();
        put_bytes(1, text.as_bytes(), &mut p);
        put_varint(2 << 3 | 5, &mut p);
        p.extend_from_slice(&score.to_le_bytes());
        if kind != 1 {
            put_int(3, kind as i64, &mut p);
        }
        put_bytes(1, &p, &mut out);
    }
    let mut trainer = Vec::new();
    put_int(3, 2, &mut trainer); // model_type BPE
    put_int(4, tokens.len() as i64, &mut trainer); // vocab_size
    put_int(35, i64::from(types.contains(&BYTE)), &mut trainer); // byte_fallback
    put_int(40, unk, &mut trainer);
    put_int(41, id("bos")?, &mut trainer);
    put_int(42, id("eos")?, &mut trainer);
    put_int(43, id("padding")?, &mut trainer);
    put_bytes(2, &trainer, &mut out);
    let mut normalizer = Vec::new();
    put_bytes(1, b"identity", &mut normalizer);
    let dummy_prefix = meta
        .opt_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(true);
    put_int(3, i64::from(dummy_prefix), &mut normalizer);
    put_int(4, 0, &mut normalizer); // remove_extra_whitespaces
    put_int(5, 1, &mut normalizer); // escape_whitespaces
    put_bytes(3, &normalizer, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(text: &str, score: f32, kind: Option<u64>) -> Vec<u8> {
        let mut p = vec![0x0a];
        put_varint(text.len() as u64, &mut p);
        p.extend_from_slice(text.as_bytes());
        p.push(0x15);
        p.extend_from_slice(&score.to_le_bytes());
        if let Some(k) = kind {
            p.push(0x18);
            put_varint(k, &mut p);
        }
        let mut m = vec![0x0a];
        put_varint(p.len() as u64, &mut m);
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
