//! One model's grammar machinery: llguidance's parser factory over its
//! vocabulary, and the grammars compiled for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use llguidance::{Matcher, ParserFactory, TokenParser};
use mlxr_tokenizer::Tokenizer;

use crate::{Constraint, StructuredError, TokenConstraint, Tokenization, Vocab};

/// Compiled grammars kept for reuse (an agent sends the same schema or
/// tools with every turn); the cache starts over when full.
const CACHED_GRAMMARS: usize = 64;

pub struct Grammars {
    factory: ParserFactory,
    compiled: Mutex<HashMap<String, TokenParser>>,
}

impl Grammars {
    /// Builds the token trie and the parser factory: a fraction of a second
    /// for a 150k-token vocabulary, so once per model.
    pub fn new(tokenizer: &Arc<Tokenizer>, n_vocab: usize) -> Result<Grammars, StructuredError> {
        Self::with_vocab(Vocab::new(tokenizer, n_vocab, Tokenization::Canonical))
    }

    /// Over any [`Vocab`] (e.g. one that forces nothing: [`Tokenization::Any`]).
    pub fn with_vocab(vocab: Vocab) -> Result<Grammars, StructuredError> {
        let env = Arc::new(vocab);
        let mut factory =
            ParserFactory::new_simple(&(env as _)).map_err(|e| StructuredError::Invalid {
                what: "vocabulary",
                message: e.to_string(),
            })?;
        factory.quiet();
        Ok(Grammars {
            factory,
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// A fresh matcher for `constraint`, at the start of the output. A
    /// constraint that does not compile is the request's error.
    pub fn compile(&self, constraint: &Constraint) -> Result<TokenConstraint, StructuredError> {
        let invalid = |message: String| StructuredError::Invalid {
            what: constraint.kind(),
            message,
        };
        let resolved;
        let constraint = match constraint {
            Constraint::Opened { token, lark } => {
                let id = self
                    .factory
                    .tok_env()
                    .tok_trie()
                    .get_special_token(token)
                    .ok_or_else(|| {
                        invalid(format!("the vocabulary has no special token {token}"))
                    })?;
                resolved = Constraint::Lark(Constraint::opened_lark(id, lark));
                &resolved
            }
            other => other,
        };
        let key = constraint.cache_key();
        let cached = self.cache().get(&key).cloned();
        let parser = match cached {
            Some(parser) => parser,
            None => {
                let grammar = constraint.grammar().map_err(invalid)?;
                let parser = self
                    .factory
                    .create_parser(grammar)
                    .map_err(|e| invalid(e.to_string()))?;
                let mut cache = self.cache();
                if cache.len() >= CACHED_GRAMMARS {
                    cache.clear();
                }
                cache.insert(key, parser.clone());
                parser
            }
        };
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(invalid(e));
        }
        Ok(match constraint {
            Constraint::Triggered { trigger, .. } => {
                let token = self.factory.tok_env().tok_trie().get_special_token(trigger);
                TokenConstraint::triggered(matcher, token)
            }
            _ => TokenConstraint::new(matcher),
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, TokenParser>> {
        // A panic while holding the lock leaves only a cache behind.
        self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }
}
