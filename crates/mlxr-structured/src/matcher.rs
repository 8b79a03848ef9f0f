//! One sequence's position in its grammar.

use llguidance::Matcher;
use mlxr_tokenizer::TokenId;

use crate::StructuredError;

/// The grammar state of one sequence: which tokens may come next, moved on
/// by each token the sequence keeps.
pub struct TokenConstraint {
    matcher: Matcher,
}

impl std::fmt::Debug for TokenConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConstraint").finish_non_exhaustive()
    }
}

impl TokenConstraint {
    pub(crate) fn new(matcher: Matcher) -> Self {
        Self { matcher }
    }

    /// Whether `token` may come next (end-of-generation tokens: once the
    /// output is complete). Cheap next to [`Self::mask`].
    pub fn allows(&mut self, token: TokenId) -> bool {
        self.matcher.validate_tokens(&[token]).is_ok_and(|n| n == 1)
    }

    /// Sets every token that may not come next to -inf in `scores` (one
    /// per vocabulary id).
    pub fn mask(&mut self, scores: &mut [f32]) -> Result<(), StructuredError> {
        let allowed = self
            .matcher
            .compute_mask_or_eos()
            .map_err(|e| StructuredError::Matcher(e.to_string()))?;
        allowed.iter_unset_entries(|i| {
            if let Some(s) = scores.get_mut(i) {
                *s = f32::NEG_INFINITY;
            }
        });
        Ok(())
    }

    /// Moves past `token`, which the sequence keeps.
    pub fn commit(&mut self, token: TokenId) -> Result<(), StructuredError> {
        self.matcher
            .consume_token(token)
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// The tokens the grammar forces next, if any (those every way on
    /// leads through), as the model's tokenizer would split their bytes.
    pub fn forced(&mut self) -> Vec<TokenId> {
        self.matcher.compute_ff_tokens()
    }

    /// Forgets the last `n` committed tokens.
    pub fn rollback(&mut self, n: usize) -> Result<(), StructuredError> {
        self.matcher
            .rollback(n)
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// The output is complete and nothing more may follow.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// The output so far is complete (more may still follow).
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}
