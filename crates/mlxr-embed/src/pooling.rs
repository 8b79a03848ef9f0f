//! Token states -> one vector per text, as sentence-transformers' Pooling and
//! Normalize modules compute it.

/// How token states become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean of the states of the real (unpadded) tokens, special tokens included.
    Mean,
    /// The state of the first token ([CLS]).
    Cls,
}

impl Pooling {
    /// Pools `states`, the `[seq_len, hidden]` row-major states of one text,
    /// of which the first `len` are real tokens (the rest is padding).
    pub fn pool(self, states: &[f32], hidden: usize, len: usize) -> Vec<f32> {
        debug_assert!(len >= 1 && states.len() >= len * hidden);
        match self {
            Pooling::Cls => states[..hidden].to_vec(),
            Pooling::Mean => {
                let mut sum = vec![0f32; hidden];
                for token in states[..len * hidden].chunks_exact(hidden) {
                    for (s, x) in sum.iter_mut().zip(token) {
                        *s += x;
                    }
                }
                let count = len as f32;
                sum.iter_mut().for_each(|s| *s /= count);
                sum
            }
        }
    }
}

/// Scales `v` to unit L2 norm; like torch's F.normalize, a norm below 1e-12
/// is taken as 1e-12 so a zero vector stays zero.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_ignores_padding() {
        // 3 positions of 2 dims, the last one padding.
        let states = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        assert_eq!(Pooling::Mean.pool(&states, 2, 2), vec![2.0, 3.0]);
    }

    #[test]
    fn cls_takes_the_first_token() {
        let states = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(Pooling::Cls.pool(&states, 2, 2), vec![1.0, 2.0]);
    }

    #[test]
    fn normalize_gives_unit_norm_and_keeps_zero() {
        let mut v = [3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, [0.0, 0.0]);
    }
}
