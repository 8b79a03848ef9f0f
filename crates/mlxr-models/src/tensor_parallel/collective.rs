//! The collectives a tensor-parallel forward pass needs: an all-reduce
//! (sum) after each row-parallel matmul, and an all-gather of the
//! vocab-parallel LM head's logits.
//!
//! [`LocalWorld`] is the test and CPU world: `N` ranks on `N` threads of one
//! process, meeting at a barrier over shared buffers. NCCL over GPUs is to
//! come behind the same [`Collective`] trait.

use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};

/// Why a collective failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CollectiveError {
    #[error("the world was aborted (a rank failed)")]
    Aborted,
    #[error("{op}: rank {rank} gave {len} values, this rank {expected}")]
    Mismatch {
        op: &'static str,
        rank: usize,
        len: usize,
        expected: usize,
    },
    #[error("all-gather: rank {rank}'s {len} values are not {rows} rows")]
    Rows {
        rank: usize,
        len: usize,
        rows: usize,
    },
}

/// One rank's handle on its world. Every rank calls the same collectives
/// in the same order; each call returns once every rank has made it.
pub trait Collective: Send {
    fn rank(&self) -> usize;
    fn world(&self) -> usize;

    /// `buf` replaced by the sum of every rank's `buf` (all of one length).
    /// Every rank gets the same bits.
    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<(), CollectiveError>;

    /// Every rank's `part` (`[rows, w_r]` row-major) side by side in rank
    /// order into `out` (`[rows, Σ w_r]`).
    fn all_gather_cols(
        &self,
        part: &[f32],
        rows: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), CollectiveError>;
}

/// A rank of a world of threads in one process (tests and the CPU).
pub struct LocalWorld {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    /// Each rank's input to the collective in progress.
    parts: Vec<RwLock<Vec<f32>>>,
    barrier: Barrier,
}

impl LocalWorld {
    /// The ranks of a new world of `world` (at least one), in rank order.
    pub fn new(world: usize) -> Vec<LocalWorld> {
        let world = world.max(1);
        let shared = Arc::new(Shared {
            parts: (0..world).map(|_| RwLock::new(Vec::new())).collect(),
            barrier: Barrier::new(world),
        });
        (0..world)
            .map(|rank| LocalWorld {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    /// Fails every collective in progress or to come, on every rank: a rank
    /// that cannot go on releases the others instead of leaving them
    /// waiting.
    pub fn abort(&self) {
        self.shared.barrier.abort();
    }

    /// Publishes `part` as this rank's input, then waits for every rank's.
    fn publish(&self, part: &[f32]) -> Result<(), CollectiveError> {
        {
            let mut mine = write(&self.shared.parts[self.rank]);
            mine.clear();
            mine.extend_from_slice(part);
        }
        self.shared.barrier.wait()
    }
}

impl Collective for LocalWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.shared.parts.len()
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<(), CollectiveError> {
        self.publish(buf)?;
        // Every rank sees the same lengths, so all fail or none does.
        for (rank, part) in self.shared.parts.iter().enumerate() {
            let len = read(part).len();
            if len != buf.len() {
                return Err(CollectiveError::Mismatch {
                    op: "all-reduce",
                    rank,
                    len,
                    expected: buf.len(),
                });
            }
        }
        // In rank order on every rank, so every rank gets the same bits.
        buf.copy_from_slice(&read(&self.shared.parts[0]));
        for part in &self.shared.parts[1..] {
            buf.iter_mut()
                .zip(read(part).iter())
                .for_each(|(s, p)| *s += p);
        }
        // No rank overwrites its part for the next collective before every
        // rank has read this one's.
        self.shared.barrier.wait()
    }

    fn all_gather_cols(
        &self,
        part: &[f32],
        rows: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), CollectiveError> {
        self.publish(part)?;
        let parts: Vec<_> = self.shared.parts.iter().map(read).collect();
        let mut widths = Vec::with_capacity(parts.len());
        for (rank, p) in parts.iter().enumerate() {
            if rows == 0 || !p.len().is_multiple_of(rows) {
                let len = p.len();
                return Err(CollectiveError::Rows { rank, len, rows });
            }
            widths.push(p.len() / rows);
        }
        out.clear();
        for row in 0..rows {
            for (p, &w) in parts.iter().zip(&widths) {
                out.extend_from_slice(&p[row * w..(row + 1) * w]);
            }
        }
        drop(parts);
        self.shared.barrier.wait()
    }
}

/// Runs `rank_main` for each rank of a new [`LocalWorld`] of `world`, each
/// on a thread of its own, and returns their results in rank order. A rank
/// that fails or panics aborts the world, so the others' collectives fail
/// instead of waiting for it forever.
pub fn run_local_world<T: Send, E: Send>(
    world: usize,
    rank_main: impl Fn(LocalWorld) -> Result<T, E> + Sync,
) -> Vec<Result<T, E>> {
    let ranks = LocalWorld::new(world);
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank| {
                let rank_main = &rank_main;
                scope.spawn(move || {
                    let mut guard = AbortOnFailure(rank.shared.clone(), true);
                    let result = rank_main(rank);
                    guard.1 = result.is_err();
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Aborts the world when dropped armed (by a failure or a panic).
struct AbortOnFailure(Arc<Shared>, bool);

impl Drop for AbortOnFailure {
    fn drop(&mut self) {
        if self.1 {
            self.0.barrier.abort();
        }
    }
}

/// `std::sync::Barrier` that can be aborted.
struct Barrier {
    n: usize,
    state: Mutex<BarrierState>,
    changed: Condvar,
}

#[derive(Default)]
struct BarrierState {
    arrived: usize,
    generation: u64,
    aborted: bool,
}

impl Barrier {
    fn new(n: usize) -> Self {
        Self {
            n,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    fn wait(&self) -> Result<(), CollectiveError> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.aborted {
            return Err(CollectiveError::Aborted);
        }
        let generation = s.generation;
        s.arrived += 1;
        if s.arrived == self.n {
            s.arrived = 0;
            s.generation += 1;
            self.changed.notify_all();
            return Ok(());
        }
        while s.generation == generation && !s.aborted {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        if s.generation == generation {
            return Err(CollectiveError::Aborted);
        }
        Ok(())
    }

    fn abort(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.aborted = true;
        self.changed.notify_all();
    }
}

fn read(part: &RwLock<Vec<f32>>) -> std::sync::RwLockReadGuard<'_, Vec<f32>> {
    part.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(part: &RwLock<Vec<f32>>) -> std::sync::RwLockWriteGuard<'_, Vec<f32>> {
    part.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_reduce_sums_in_rank_order_on_every_rank() {
        let results = run_local_world(3, |rank| {
            let r = rank.rank() as f32;
            let mut buf = vec![r, 10.0 * r, 1e8];
            rank.all_reduce_sum(&mut buf)?;
            // A second round reuses the parts.
            let mut again = vec![1.0; 2];
            rank.all_reduce_sum(&mut again)?;
            Ok::<_, CollectiveError>((buf, again))
        });
        for result in results {
            let (buf, again) = result.unwrap();
            assert_eq!(buf, [3.0, 30.0, 3e8]);
            assert_eq!(again, [3.0, 3.0]);
        }
    }

    #[test]
    fn all_gather_puts_each_ranks_columns_side_by_side() {
        // Uneven widths: rank 0 has 2 columns, rank 1 one (the vocab's last
        // part is shorter).
        let results = run_local_world(2, |rank| {
            let part: Vec<f32> = match rank.rank() {
                0 => vec![1.0, 2.0, 4.0, 5.0],
                _ => vec![3.0, 6.0],
            };
            let mut out = Vec::new();
            rank.all_gather_cols(&part, 2, &mut out)?;
            Ok::<_, CollectiveError>(out)
        });
        for result in results {
            assert_eq!(result.unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        }
    }

    #[test]
    fn a_failing_rank_releases_the_others() {
        let results = run_local_world(3, |rank| {
            if rank.rank() == 1 {
                return Err(CollectiveError::Aborted);
            }
            let mut buf = vec![1.0];
            rank.all_reduce_sum(&mut buf)
        });
        assert!(results.iter().all(|r| r.is_err()));
    }

    #[test]
    fn lengths_that_differ_fail_on_every_rank() {
        let results = run_local_world(2, |rank| {
            let mut buf = vec![1.0; 2 + rank.rank()];
            rank.all_reduce_sum(&mut buf)
        });
        assert!(results
            .iter()
            .all(|r| matches!(r, Err(CollectiveError::Mismatch { .. }))));
    }
}
