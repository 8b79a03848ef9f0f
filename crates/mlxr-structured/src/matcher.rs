//! One sequence's position in its grammar.

use llguidance::toktrie::SimpleVob;
use llguidance::Matcher;
use mlxr_tokenizer::TokenId;

use crate::StructuredError;

/// The grammar state of one sequence: which tokens may come next, moved on
/// by each token the sequence keeps.
pub struct TokenConstraint {
    matcher: Matcher,
    /// A grammar that holds only from a trigger token on ([`crate::Constraint::Triggered`]).
    trigger: Option<Trigger>,
    /// The allowed tokens of the next position, computed before they are
    /// asked for ([`Self::mask_ahead`]); gone with the next committed token.
    ahead: Option<SimpleVob>,
}

struct Trigger {
    /// `None`: the vocabulary has no such token; the grammar never holds.
    token: Option<TokenId>,
    armed: bool,
    /// The grammar at its start, for the next trigger.
    fresh: Matcher,
}

impl std::fmt::Debug for TokenConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConstraint").finish_non_exhaustive()
    }
}

impl TokenConstraint {
    pub(crate) fn new(matcher: Matcher) -> Self {
        Self {
            matcher,
            trigger: None,
            ahead: None,
        }
    }

    pub(crate) fn triggered(matcher: Matcher, token: Option<TokenId>) -> Self {
        Self {
            trigger: Some(Trigger {
                token,
                armed: false,
                fresh: matcher.clone(),
            }),
            matcher,
            ahead: None,
        }
    }

    /// Free text: a trigger not (yet) seen.
    fn free(&self) -> bool {
        self.trigger.as_ref().is_some_and(|t| !t.armed)
    }

    /// Whether `token` may come next (end-of-generation tokens: once the
    /// output is complete). Cheap next to [`Self::mask`], and a bit test
    /// where the mask was computed ahead.
    pub fn allows(&mut self, token: TokenId) -> bool {
        if self.free() {
            return true;
        }
        if self.ahead.as_ref().is_some_and(|m| m.is_allowed(token)) {
            return true;
        }
        self.matcher.validate_tokens(&[token]).is_ok_and(|n| n == 1)
    }

    /// Computes the next position's mask now (e.g. while the forward pass
    /// that scores that position runs), for [`Self::allows`] and
    /// [`Self::mask`] to use: they answer as they would without it.
    pub fn mask_ahead(&mut self) -> Result<(), StructuredError> {
        if self.free() || self.ahead.is_some() {
            return Ok(());
        }
        self.ahead = Some(self.next_mask()?);
        Ok(())
    }

    fn next_mask(&mut self) -> Result<SimpleVob, StructuredError> {
        self.matcher
            .compute_mask_or_eos()
            .map_err(|e| StructuredError::Matcher(e.to_string()))
    }

    /// Sets every token that may not come next to -inf in `scores` (one
    /// per vocabulary id).
    pub fn mask(&mut self, scores: &mut [f32]) -> Result<(), StructuredError> {
        if self.free() {
            return Ok(());
        }
        self.mask_ahead()?;
        if let Some(allowed) = &self.ahead {
            allowed.iter_unset_entries(|i| {
                if let Some(s) = scores.get_mut(i) {
                    *s = f32::NEG_INFINITY;
                }
            });
        }
        Ok(())
    }

    /// Moves past `token`, which the sequence keeps.
    pub fn commit(&mut self, token: TokenId) -> Result<(), StructuredError> {
        self.ahead = None;
        if let Some(t) = &mut self.trigger {
            if !t.armed {
                t.armed = t.token == Some(token);
                return Ok(());
            }
        }
        self.matcher
            .consume_token(token)
            .map_err(|e| StructuredError::Matcher(e.to_string()))?;
        if let Some(t) = &mut self.trigger {
            if self.matcher.is_stopped() {
                // The triggered part is complete: free text again.
                self.matcher = t.fresh.clone();
                t.armed = false;
            }
        }
        Ok(())
    }

    /// The tokens the grammar forces next, if any (those every way on
    /// leads through), as the model's tokenizer would split their bytes.
    pub fn forced(&mut self) -> Vec<TokenId> {
        if self.free() {
            return Vec::new();
        }
        self.matcher.compute_ff_tokens()
    }

    /// The output is complete and nothing more may follow (never for a
    /// triggered grammar, which text may follow).
    pub fn is_finished(&self) -> bool {
        self.trigger.is_none() && self.matcher.is_stopped()
    }
}
