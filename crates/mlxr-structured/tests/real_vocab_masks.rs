//! The masks over the real models' vocabularies (two byte-level BPE, one
//! SentencePiece) against an oracle that knows nothing of llguidance: a
//! token may come next exactly when the text so far plus the token's bytes
//! (the detokenizer's) is still the start of a word of a finite language,
//! and an end-of-generation token exactly when the text is a whole word
//! (a vocabulary without forced tokens, which narrow the mask where the
//! grammar determines the bytes: tested on their own below). Every other
//! walk computes its masks ahead (`mask_ahead`), which changes no answer.

use mlxr_formats::gguf::GgufFile;
use mlxr_structured::{Constraint, Grammars, Tokenization, Vocab};
use mlxr_tokenizer::{TokenId, Tokenizer};

const WORDS: &[&str] = &[
    "yes",
    "no",
    "nope",
    " maybe",
    "café au lait",
    "日本語のテキスト",
    "{\"a\": [1, 2]}",
    "tab\there\nnewline",
    "3.14159",
];

fn escape(word: &str) -> String {
    let mut out = String::new();
    for c in word.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A small deterministic generator (the walk only needs to vary).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

fn expected(tokenizer: &Tokenizer, pieces: &[Vec<u8>], text: &[u8]) -> Vec<TokenId> {
    let whole = WORDS.iter().any(|w| w.as_bytes() == text);
    (0..pieces.len() as TokenId)
        .filter(|&t| {
            if tokenizer.is_eog(t) {
                return whole;
            }
            let piece = &pieces[t as usize];
            !piece.is_empty()
                && WORDS.iter().any(|w| {
                    let w = w.as_bytes();
                    w.len() >= text.len() + piece.len()
                        && w.starts_with(text)
                        && w[text.len()..].starts_with(piece)
                })
        })
        .collect()
}

fn check_model(name: &str) {
    let Some(path) = mlxr_testkit::model_path(name) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let tokenizer = std::sync::Arc::new(Tokenizer::from_gguf(file.metadata()).unwrap());
    let n_vocab = tokenizer.vocab_size();
    // Control and unknown tokens have no bytes: never allowed.
    let pieces: Vec<Vec<u8>> = (0..n_vocab as TokenId)
        .map(|t| {
            let a = tokenizer.token_attrs(t).unwrap();
            let text = tokenizer.token_text(t).unwrap_or("");
            let tag = a.is_user_defined() && text.starts_with('<') && text.ends_with('>');
            if a.is_control() || a.is_unknown() || a.is_unused() || tag {
                Vec::new()
            } else {
                tokenizer.token_to_piece(t, false)
            }
        })
        .collect();
    let grammars =
        Grammars::with_vocab(Vocab::new(&tokenizer, n_vocab, Tokenization::Any)).unwrap();
    let regex = WORDS
        .iter()
        .map(|w| escape(w))
        .collect::<Vec<_>>()
        .join("|");
    let constraint = Constraint::Regex(format!("({regex})"));
    let mut rng = Lcg(7);
    let mut scores = vec![0.0f32; n_vocab];
    for walk in 0..12 {
        let mut matcher = grammars.compile(&constraint).unwrap();
        let mut text = Vec::new();
        let mut ended = false;
        for step in 0..64 {
            scores.fill(0.0);
            // Odd walks compute each mask ahead, as the engine does while
            // a forward pass runs: the answers must not change.
            if walk % 2 == 1 {
                matcher.mask_ahead().unwrap();
            }
            matcher.mask(&mut scores).unwrap();
            let allowed: Vec<TokenId> = (0..n_vocab as TokenId)
                .filter(|&t| scores[t as usize] == 0.0)
                .collect();
            let want = expected(&tokenizer, &pieces, &text);
            if allowed != want {
                let only = |a: &[TokenId], b: &[TokenId]| -> Vec<(TokenId, String)> {
                    a.iter()
                        .filter(|t| !b.contains(t))
                        .take(10)
                        .map(|&t| (t, format!("{:?}", tokenizer.token_text(t))))
                        .collect()
                };
                panic!(
                    "{name}: walk {walk} step {step} after {:?}: {} allowed, {} expected; \
                     allowed only: {:?}; expected only: {:?}",
                    String::from_utf8_lossy(&text),
                    allowed.len(),
                    want.len(),
                    only(&allowed, &want),
                    only(&want, &allowed)
                );
            }
            for &t in &allowed {
                assert!(
                    matcher.allows(t),
                    "{name}: allows({t}) disagrees with the mask"
                );
            }
            for _ in 0..16 {
                let t = rng.below(n_vocab) as TokenId;
                assert_eq!(
                    matcher.allows(t),
                    allowed.contains(&t),
                    "{name}: walk {walk}: allows({t}) disagrees with the mask"
                );
            }
            let t = allowed[rng.below(allowed.len())];
            if tokenizer.is_eog(t) {
                ended = true;
                break;
            }
            matcher.commit(t).unwrap();
            text.extend_from_slice(&pieces[t as usize]);
            if matcher.is_finished() {
                assert!(WORDS.iter().any(|w| w.as_bytes() == text));
                ended = true;
                break;
            }
        }
        assert!(ended, "{name}: walk {walk} never ended");
        assert!(
            WORDS.iter().any(|w| w.as_bytes() == text),
            "{name}: walk {walk}"
        );
    }
}

#[test]
fn smollm2_masks_match_the_oracle() {
    check_model(mlxr_testkit::SMOLLM2);
}

#[test]
fn qwen_masks_match_the_oracle() {
    check_model(mlxr_testkit::QWEN_CODER_05B);
}

#[test]
fn gemma3_sentencepiece_masks_match_the_oracle() {
    check_model(mlxr_testkit::GEMMA3);
}

/// The forced (fast-forward) tokens of a JSON schema's required key, on the
/// byte-level BPE vocabularies: they spell the key as our tokenizer splits
/// it, each one allowed where it stands. SentencePiece forces nothing (its
/// encoder's splits of a fragment are not the model's).
#[test]
fn forced_tokens_spell_a_required_key() {
    for (name, forces) in [
        (mlxr_testkit::SMOLLM2, true),
        (mlxr_testkit::QWEN_CODER_05B, true),
        (mlxr_testkit::GEMMA3, false),
    ] {
        let Some(path) = mlxr_testkit::model_path(name) else {
            continue;
        };
        let file = GgufFile::open(&path).unwrap();
        let tokenizer = std::sync::Arc::new(Tokenizer::from_gguf(file.metadata()).unwrap());
        let grammars = Grammars::new(&tokenizer, tokenizer.vocab_size()).unwrap();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"temperature_celsius": {"type": "integer"}},
            "required": ["temperature_celsius"]
        });
        let mut m = grammars.compile(&Constraint::JsonSchema(schema)).unwrap();
        let mut text = String::new();
        let mut forced_text = String::new();
        for _ in 0..40 {
            let forced = m.forced();
            if forced.is_empty() {
                // Go on with the allowed token that starts the key or the
                // value soonest: `{`, `"`, `:`, a digit, `}`.
                let mut scores = vec![0.0f32; tokenizer.vocab_size()];
                m.mask(&mut scores).unwrap();
                let Some(t) = ["{", "\"", ":", "}", "4"].iter().find_map(|s| {
                    let id = tokenizer.encode(s, false, false)[0];
                    (scores[id as usize] == 0.0).then_some(id)
                }) else {
                    break;
                };
                m.commit(t).unwrap();
                text += &tokenizer.decode(&[t], false);
            } else {
                for &t in &forced {
                    assert!(m.allows(t), "{name}: forced token {t} refused");
                    m.commit(t).unwrap();
                }
                let piece = tokenizer.decode(&forced, false);
                forced_text += &piece;
                text += &piece;
            }
            if m.is_finished() {
                break;
            }
        }
        if forces {
            assert_eq!(text, "{\"temperature_celsius\":4}", "{name}");
            assert!(
                forced_text.contains("temperature_celsius"),
                "{name}: {forced_text:?}"
            );
        } else {
            assert_eq!(forced_text, "", "{name}");
        }
    }
}
