//! When a constrained sequence's grammar mask is computed. The sampler
//! keeps a drawn token the grammar allows and needs the mask (llguidance's
//! walk of the token trie, the costly part) only when the grammar refuses
//! it. Computed lazily, the mask waits until then; computed ahead, it runs
//! on other threads while the forward pass that scores the position runs
//! (for the sequences whose grammar refused their last token: those likely
//! to need it), which is free where that pass waits on a GPU and steals
//! cores from it on the CPU. Either way a sequence samples the same tokens.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::scheduler::{ScheduledChunk, Scheduler};
use crate::DeviceChoice;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GrammarMasks {
    /// Ahead on a GPU, lazily on the CPU.
    #[default]
    Auto,
    /// Only when the grammar refuses a drawn token.
    Lazy,
    /// For every constrained sequence of a step, while its forward pass runs.
    Ahead,
}

impl GrammarMasks {
    /// `Auto` made concrete for a model on `device`.
    pub fn resolve(self, device: DeviceChoice) -> Self {
        match (self, device) {
            (Self::Auto, DeviceChoice::Cpu) => Self::Lazy,
            (Self::Auto, _) => Self::Ahead,
            (timing, _) => timing,
        }
    }
}

impl FromStr for GrammarMasks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "lazy" => Ok(Self::Lazy),
            "ahead" => Ok(Self::Ahead),
            _ => Err(format!("'{s}' is not a mask timing (auto, lazy, ahead)")),
        }
    }
}

impl fmt::Display for GrammarMasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Lazy => "lazy",
            Self::Ahead => "ahead",
        })
    }
}

/// Computes the masks of the constrained sequences that `chunks` sample
/// from one row (drafts verify row by row and keep the lazy order) and
/// whose grammar refused their last drawn token, on rayon's threads where
/// `threads` is more than one.
pub(crate) fn compute_ahead(scheduler: &mut Scheduler, chunks: &[ScheduledChunk], threads: usize) {
    let mut seqs = scheduler.sampling_seqs_mut(chunks, |c| c.draft == 0);
    seqs.retain(|(_, s)| s.wants_mask_ahead());
    if threads > 1 {
        seqs.par_iter_mut().for_each(|(_, s)| s.mask_ahead());
    } else {
        seqs.iter_mut().for_each(|(_, s)| s.mask_ahead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_ahead_on_a_gpu_and_lazy_on_the_cpu() {
        assert_eq!(
            GrammarMasks::Auto.resolve(DeviceChoice::Cpu),
            GrammarMasks::Lazy
        );
        assert_eq!(
            GrammarMasks::Auto.resolve(DeviceChoice::Cuda(0)),
            GrammarMasks::Ahead
        );
        assert_eq!(
            GrammarMasks::Lazy.resolve(DeviceChoice::Cuda(0)),
            GrammarMasks::Lazy
        );
        assert_eq!(
            GrammarMasks::Ahead.resolve(DeviceChoice::Cpu),
            GrammarMasks::Ahead
        );
        for t in [GrammarMasks::Auto, GrammarMasks::Lazy, GrammarMasks::Ahead] {
            assert_eq!(t.to_string().parse(), Ok(t));
        }
        assert!("eager".parse::<GrammarMasks>().is_err());
    }
}
