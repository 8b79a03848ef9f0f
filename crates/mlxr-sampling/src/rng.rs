use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// The sampler's random stream: ChaCha20 seeded from a u64.
pub(crate) struct Rng {
    inner: ChaCha20Rng,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self {
            inner: ChaCha20Rng::seed_from_u64(seed),
        }
    }

    /// Uniform in [0, 1) from the top 53 bits, a conversion fixed here rather
    /// than left to a rand release.
    pub fn uniform(&mut self) -> f64 {
        (self.inner.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
