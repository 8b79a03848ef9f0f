//! Unit tests with synthetic vocabularies.

use super::*;

/// A byte-level BPE vocabulary: the 256 byte characters, the given merged
/// pieces, and special tokens appended with their GGUF types.
fn bpe_config(pre: &str, merges: &[&str], specials: &[(&str, i32)]) -> TokenizerConfig {
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| unicode::byte_to_char(b).to_string())
        .collect();
    let mut types = vec![1; 256];
    for m in merges {
        let joined = m.replacen(' ', "", 1);
        if !tokens.contains(&joined) {
            tokens.push(joined);
            types.push(1);
        }
    }
    for (t, ty) in specials {
        tokens.push(t.to_string());
        types.push(*ty);
    }
    TokenizerConfig {
        model: "gpt2".into(),
        pre: Some(pre.into()),
        tokens,
        token_types: Some(types),
        merges: Some(merges.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

fn id(tok: &Tokenizer, text: &str) -> u32 {
    tok.token_id(text)
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

fn pieces(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&i| tok.token_text(i).unwrap().to_string())
        .collect()
}

const MERGES: &[&str] = &["Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "i s", "Ġ is"];

#[test]
fn bpe_merges_and_pretokenizer() {
    let tok = Tokenizer::from_config(&bpe_config("gpt-2", MERGES, &[])).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    let ids = tok.encode("the cat is", false, false);
    assert_eq!(pieces(&tok, &ids), ["t", "he", "Ġcat", "Ġis"]);
    assert_eq!(tok.decode(&ids, false), "the cat is");
    // Bytes without merges stay single byte tokens (é is two bytes).
    let ids = tok.encode("é!", false, false);
    assert_eq!(
        ids,
        [0xC3u8, 0xA9, b'!'].map(|b| id(&tok, &unicode::byte_to_char(b).to_string()))
    );
    assert_eq!(tok.decode(&ids, false), "é!");
}

#[test]
fn bpe_special_tokens_and_flags() {
    let cfg = bpe_config(
        "smollm",
        MERGES,
        &[("<|im_start|>", 3), ("<|im_end|>", 3), ("<|endoftext|>", 3)],
    );
    let tok = Tokenizer::from_config(&cfg).unwrap();
    let start = id(&tok, "<|im_start|>");
    let end = id(&tok, "<|im_end|>");
    let eot = id(&tok, "<|endoftext|>");
    // No add_bos for BPE by default.
    assert!(!tok.add_bos());
    let ids = tok.encode("<|im_start|>the cat<|im_end|>", true, true);
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), Some(&end));
    assert_eq!(pieces(&tok, &ids[1..ids.len() - 1]), ["t", "he", "Ġcat"]);
    // Without parse_special the markers are plain text.
    let plain = tok.encode("<|im_start|>", false, false);
    assert!(!plain.contains(&start));
    assert_eq!(tok.decode(&plain, false), "<|im_start|>");
    // Rendering of control tokens.
    assert_eq!(tok.decode(&ids, true), "<|im_start|>the cat<|im_end|>");
    assert_eq!(tok.decode(&ids, false), "the cat");
    assert!(tok.token_to_piece(end, false).is_empty());
    assert_eq!(tok.token_to_piece(end, true), b"<|im_end|>");
    // End of generation: detected by text.
    assert!(tok.is_eog(end) && tok.is_eog(eot));
    assert!(!tok.is_eog(start));
    assert!(tok.is_control(start));
    // smollm isolates digits.
    let ids = tok.encode("12", false, false);
    assert_eq!(pieces(&tok, &ids), ["1", "2"]);
}

#[test]
fn bpe_add_bos_and_eos_from_metadata() {
    let mut cfg = bpe_config(
        "llama-bpe",
        MERGES,
        &[("<|begin_of_text|>", 3), ("<|end_of_text|>", 3)],
    );
    let n = cfg.tokens.len() as u32;
    cfg.special.bos = Some(n - 2);
    cfg.special.eos = Some(n - 1);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    // llama3-style pre types turn add_bos on.
    assert!(tok.add_bos());
    assert_eq!(
        tok.encode("the", true, false),
        [n - 2, id(&tok, "t"), id(&tok, "he")]
    );
    assert_eq!(tok.encode("", true, false), [n - 2]);
    assert!(tok.encode("", false, false).is_empty());
    cfg.add_bos = Some(false);
    cfg.add_eos = Some(true);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    assert_eq!(
        tok.encode("the", true, false),
        [id(&tok, "t"), id(&tok, "he"), n - 1]
    );
    assert_eq!(tok.eos(), Some(n - 1));
    assert!(tok.is_eog(n - 1));
}

#[test]
fn bpe_clean_spaces_on_decode() {
    // gpt-2 keeps llama.cpp's clean_spaces; smollm does not.
    let gpt2 = Tokenizer::from_config(&bpe_config("gpt-2", &[], &[])).unwrap();
    let ids = gpt2.encode("a , b . c 's d ' e", false, false);
    assert_eq!(gpt2.decode(&ids, false), "a, b. c's d'e");
    let smol = Tokenizer::from_config(&bpe_config("smollm", &[], &[])).unwrap();
    let ids = smol.encode("a , b .", false, false);
    assert_eq!(smol.decode(&ids, false), "a , b .");
}

#[test]
fn bpe_ignore_merges_takes_whole_words() {
    // "Ġcat" is in the vocabulary but no merge builds it from "Ġc"+"at" here.
    let mut cfg = bpe_config("llama-bpe", &["a t"], &[]);
    cfg.tokens.push("Ġcat".into());
    cfg.token_types.as_mut().unwrap().push(1);
    cfg.add_bos = Some(false);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    assert_eq!(pieces(&tok, &tok.encode(" cat", true, false)), ["Ġcat"]);
    cfg.pre = Some("qwen2".into());
    let tok = Tokenizer::from_config(&cfg).unwrap();
    assert_eq!(
        pieces(&tok, &tok.encode(" cat", true, false)),
        ["Ġ", "c", "at"]
    );
}

#[test]
fn bpe_merged_symbol_not_in_vocab_falls_back_to_ascii_bytes() {
    let mut cfg = bpe_config("gpt-2", &[], &[]);
    cfg.merges = Some(vec!["Ġ x".into()]);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    // "Ġx" is not a token: its bytes are looked up one by one; only "x" is a
    // one-byte token, the two bytes of "Ġ" are dropped, as llama.cpp does.
    assert_eq!(pieces(&tok, &tok.encode(" x", false, false)), ["x"]);
}

#[test]
fn errors_name_the_problem() {
    let mut cfg = bpe_config("no-such-pre", &[], &[]);
    let e = Tokenizer::from_config(&cfg).unwrap_err();
    assert!(
        matches!(e, TokenizerError::UnknownPreTokenizer(ref p) if p == "no-such-pre"),
        "{e}"
    );
    cfg.pre = Some("gpt-2".into());
    cfg.merges = None;
    let e = Tokenizer::from_config(&cfg).unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.merges"), "{e}");
    cfg.model = "bert".into();
    let e = Tokenizer::from_config(&cfg).unwrap_err();
    assert!(
        matches!(e, TokenizerError::UnsupportedModel(ref m) if m == "bert"),
        "{e}"
    );
    cfg.model = "rwkv".into();
    assert!(Tokenizer::from_config(&cfg)
        .unwrap_err()
        .to_string()
        .contains("rwkv"));
    cfg.model = "wat".into();
    assert!(matches!(
        Tokenizer::from_config(&cfg).unwrap_err(),
        TokenizerError::UnknownModel(_)
    ));
    // Missing pre-tokenizer: llama.cpp falls back to "default" with a warning.
    let mut cfg = bpe_config("x", &[], &[]);
    cfg.pre = None;
    let tok = Tokenizer::from_config(&cfg).unwrap();
    assert!(tok.warnings().iter().any(|w| w.contains("pre-tokenizer")));
    // add_bos without a usable BOS id (the BPE default 11 exists here, so point it out of range).
    cfg.pre = Some("gpt-2".into());
    cfg.add_bos = Some(true);
    cfg.tokens.truncate(5);
    cfg.token_types.as_mut().unwrap().truncate(5);
    cfg.merges = Some(vec![]);
    let e = Tokenizer::from_config(&cfg).unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.bos_token_id"), "{e}");
    // Duplicate tokens.
    let mut cfg = bpe_config("gpt-2", &[], &[]);
    cfg.tokens[1] = cfg.tokens[0].clone();
    assert!(matches!(
        Tokenizer::from_config(&cfg).unwrap_err(),
        TokenizerError::DuplicateToken { .. }
    ));
}

/// A small SentencePiece vocabulary in the layout of Llama/Gemma files.
fn spm_config(pieces: &[(&str, f32)], add_space_prefix: Option<bool>) -> TokenizerConfig {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for &(p, s) in pieces {
        tokens.push(p.to_string());
        types.push(1);
        scores.push(s);
    }
    TokenizerConfig {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        add_space_prefix,
        ..Default::default()
    }
}

const SPM_PIECES: &[(&str, f32)] = &[
    ("▁", -1.0),
    ("h", -2.0),
    ("e", -2.0),
    ("l", -2.0),
    ("o", -2.0),
    ("he", -3.0),
    ("ll", -3.0),
    ("▁he", -4.0),
    ("llo", -4.0),
    ("▁hello", -5.0),
    ("▁w", -6.0),
    ("w", -2.0),
];

#[test]
fn spm_space_prefix_and_bos() {
    let tok = Tokenizer::from_config(&spm_config(SPM_PIECES, None)).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
    assert!(tok.add_bos() && tok.add_space_prefix());
    assert_eq!(tok.bos(), Some(1));
    assert_eq!(tok.eos(), Some(2));
    let ids = tok.encode("hello hello", true, true);
    assert_eq!(ids[0], 1);
    assert_eq!(pieces(&tok, &ids[1..]), ["▁hello", "▁hello"]);
    // Decoding drops the prefixed space of the first piece only; as in
    // llama.cpp, a leading BOS (rendered empty) is that first piece.
    assert_eq!(tok.decode(&ids[1..], false), "hello hello");
    assert_eq!(tok.decode(&ids, false), " hello hello");
    // After a special token the text gets a space prefix again.
    let ids = tok.encode("hello</s>hello", false, true);
    assert_eq!(pieces(&tok, &ids), ["▁hello", "</s>", "▁hello"]);
    assert!(tok.is_eog(2));
}

#[test]
fn spm_without_space_prefix_and_byte_fallback() {
    let tok = Tokenizer::from_config(&spm_config(SPM_PIECES, Some(false))).unwrap();
    let ids = tok.encode("hello w😀", true, false);
    assert_eq!(
        pieces(&tok, &ids),
        ["<s>", "he", "llo", "▁w", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    );
    assert_eq!(tok.decode(&ids, false), "hello w😀");
    // Streaming: the emoji's bytes arrive one token at a time.
    let mut stream = StreamDecoder::new();
    let mut out = Vec::new();
    for &i in &ids {
        out.push(stream.push(&tok, i));
    }
    assert_eq!(out, ["", "he", "llo", " w", "", "", "", "😀"]);
    assert_eq!(stream.finish(), "");
    // A split character at the end of the stream becomes U+FFFD.
    let mut stream = StreamDecoder::new();
    assert_eq!(stream.push(&tok, ids[4]), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
}

#[test]
fn spm_user_defined_tokens_split_without_parse_special() {
    let mut cfg = spm_config(SPM_PIECES, Some(false));
    cfg.tokens.push("  ".into());
    cfg.token_types.as_mut().unwrap().push(4);
    cfg.scores.as_mut().unwrap().push(0.0);
    cfg.tokens.push("<start_of_turn>".into());
    cfg.token_types.as_mut().unwrap().push(3);
    cfg.scores.as_mut().unwrap().push(0.0);
    cfg.tokens.push("<end_of_turn>".into());
    cfg.token_types.as_mut().unwrap().push(3);
    cfg.scores.as_mut().unwrap().push(0.0);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    let ids = tok.encode("hello  hello", false, false);
    assert_eq!(pieces(&tok, &ids), ["he", "llo", "  ", "he", "llo"]);
    // User-defined tokens render even without special rendering.
    assert_eq!(tok.decode(&ids, false), "hello  hello");
    let ids = tok.encode("<start_of_turn>hello<end_of_turn>", false, true);
    assert_eq!(
        pieces(&tok, &ids),
        ["<start_of_turn>", "he", "llo", "<end_of_turn>"]
    );
    let eot = id(&tok, "<end_of_turn>");
    assert_eq!(tok.eot(), Some(eot));
    assert!(tok.is_eog(eot));
    let ids = tok.encode("<start_of_turn>", false, false);
    assert!(!ids.contains(&id(&tok, "<start_of_turn>")));
}

#[test]
fn unused_and_promoted_control_tokens() {
    let mut cfg = spm_config(SPM_PIECES, Some(false));
    // An end-of-turn marker stored as a normal token is promoted to control.
    cfg.tokens.push("<|im_end|>".into());
    cfg.token_types.as_mut().unwrap().push(1);
    cfg.scores.as_mut().unwrap().push(0.0);
    cfg.tokens.push("<unused7>".into());
    cfg.token_types.as_mut().unwrap().push(3);
    cfg.scores.as_mut().unwrap().push(0.0);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    let im_end = id(&tok, "<|im_end|>");
    assert!(tok.is_control(im_end) && tok.is_eog(im_end));
    assert!(tok.warnings().iter().any(|w| w.contains("<|im_end|>")));
    let unused = id(&tok, "<unused7>");
    assert!(tok.token_attrs(unused).unwrap().is_unused());
    assert_eq!(tok.encode("<|im_end|>", false, true), [im_end]);
}

#[test]
fn special_rstrip_for_phi3_names() {
    let mut cfg = spm_config(SPM_PIECES, Some(false));
    cfg.tokens.push("<|end|>".into());
    cfg.token_types.as_mut().unwrap().push(3);
    cfg.scores.as_mut().unwrap().push(0.0);
    cfg.model_name = Some("Phi-3 mini".into());
    let tok = Tokenizer::from_config(&cfg).unwrap();
    let end = id(&tok, "<|end|>");
    assert!(tok.token_attrs(end).unwrap().rstrip());
    assert_eq!(
        pieces(&tok, &tok.encode("hello<|end|>  hello", false, true)),
        ["he", "llo", "<|end|>", "he", "llo"]
    );
}

/// 20k special tokens + 10 kB of text: every occurrence of the one special
/// token in the text is split out (how long this takes is measured by
/// `llamacpp_parity`'s round trips, not asserted).
#[test]
fn special_tokens_among_20k_split_the_text() {
    let mut cfg = spm_config(SPM_PIECES, Some(false));
    for i in 0..20_000 {
        cfg.tokens.push(format!("<unused{i}>"));
        cfg.token_types.as_mut().unwrap().push(3);
        cfg.scores.as_mut().unwrap().push(0.0);
    }
    let tok = Tokenizer::from_config(&cfg).unwrap();
    let special = tok.token_id("<unused5>").unwrap();
    let text = "hello world <unused5> ".repeat(500);
    let ids = tok.encode(&text, true, true);
    assert!(ids.len() > 1000);
    assert_eq!(ids.iter().filter(|&&id| id == special).count(), 500);
    assert_eq!(tok.decode(&ids, true).matches("<unused5>").count(), 500);
}

#[test]
fn tokenizer_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
    check::<StreamDecoder>();
}

#[test]
fn config_round_trips_and_accessors() {
    let cfg = bpe_config("smollm", MERGES, &[("<|im_end|>", 3)]);
    let tok = Tokenizer::from_config(&cfg).unwrap();
    assert_eq!(tok.model(), "gpt2");
    assert_eq!(tok.pre(), Some("smollm"));
    assert_eq!(tok.n_merges(), MERGES.len());
    assert_eq!(tok.vocab_size(), cfg.tokens.len());
    assert_eq!(tok.token_text(tok.vocab_size() as u32), None);
    assert!(tok.token_to_piece(u32::MAX, true).is_empty());
    let end = id(&tok, "<|im_end|>");
    assert!(tok.token_attrs(end).unwrap().is_control());
    assert_eq!(tok.eot(), Some(end));
    assert!(format!("{tok:?}").contains("smollm"));
}
