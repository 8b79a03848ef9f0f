//! The threads that split the kernels of a buffered forward pass.
//!
//! A decode step runs ~100 small parallel regions (one per matmul) a few
//! microseconds apart. Rayon's idle workers go to sleep between them, and on
//! a virtual machine waking a sleeping vCPU costs tens of microseconds (a
//! profile of SmolLM2 decoding showed ~20% of the step in the kernel's
//! scheduler). A [`SpinPool`]'s workers spin on an atomic between regions
//! and park only after [`PARK_AFTER`] without work, as llama.cpp's threads
//! do. [`SpinPool::install`] makes it the pool of [`for_each_thread`] on
//! the calling thread; elsewhere the kernels split work with rayon.

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks.
pub const PARK_AFTER: Duration = Duration::from_millis(2);
/// How many times a region's owner spins on its workers before it yields
/// its core to them at every check.
const YIELD_AFTER_SPINS: u32 = 1 << 14;

type Job = *const (dyn Fn(usize) + Sync);

struct Shared {
    /// Bumped for every region; workers run a region when it changes.
    epoch: AtomicUsize,
    /// The region's function and its index count, written before `epoch`.
    job: UnsafeCell<(Job, usize)>,
    /// Workers still running the current region.
    running: AtomicUsize,
    panicked: AtomicBool,
    /// Workers parked (or about to check `epoch` before parking).
    parked: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
}

// SAFETY: `job` is written only by the owner between regions (when no worker
// reads it) and read by workers after they observe the new `epoch`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the pointer is only dereferenced while the owner waits.
unsafe impl Send for Shared {}

fn noop(_: usize) {}

/// `threads - 1` spinning workers; the calling thread is thread 0.
pub struct SpinPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// A region is running (a nested one runs on the calling thread alone).
    busy: Cell<bool>,
}

thread_local! {
    static CURRENT: Cell<*const SpinPool> = const { Cell::new(std::ptr::null()) };
}

impl SpinPool {
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            epoch: AtomicUsize::new(0),
            job: UnsafeCell::new((&noop as &(dyn Fn(usize) + Sync) as Job, 0)),
            running: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
        });
        let workers = (1..threads.max(1))
            .map(|index| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("mlxr-kernels-{index}"))
                    .spawn(move || work(&shared, index, threads))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Self {
            shared,
            workers,
            busy: Cell::new(false),
        })
    }

    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f` with this pool as the kernels' pool on this thread.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const SpinPool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(self)));
        f()
    }

    /// `f(i)` for `i` in `0..n`: thread `t` takes `t, t + threads, ...`.
    fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        if n <= 1 || self.workers.is_empty() || self.busy.get() {
            (0..n).for_each(f);
            return;
        }
        self.busy.set(true);
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only while this call waits for
        // every worker to finish with `f` (below).
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        // SAFETY: no worker reads `job` now: all finished the last region.
        unsafe { *s.job.get() = (job, n) };
        s.running.store(self.workers.len(), Ordering::SeqCst);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if s.parked.load(Ordering::SeqCst) > 0 {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| {
            (0..n).step_by(self.threads()).for_each(f);
        }));
        // Spin briefly, then yield: a worker the OS took off its core (a busy
        // machine, more threads than cores) needs this core to finish.
        let mut spins = 0u32;
        while s.running.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < YIELD_AFTER_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        self.busy.set(false);
        if let Err(panic) = mine {
            std::panic::resume_unwind(panic);
        }
        if s.panicked.swap(false, Ordering::SeqCst) {
            panic!("a kernel thread panicked");
        }
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.shutdown.store(true, Ordering::SeqCst);
        {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

fn work(s: &Shared, index: usize, threads: usize) {
    let mut seen = 0;
    loop {
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let epoch = s.epoch.load(Ordering::SeqCst);
            if epoch != seen {
                seen = epoch;
                break;
            }
            spins += 1;
            if !spins.is_multiple_of(1024) {
                std::hint::spin_loop();
                continue;
            }
            if idle_since.elapsed() < PARK_AFTER {
                // Between checks of the clock, let a thread that waits for
                // this core run (the region's owner, another process).
                std::thread::yield_now();
                continue;
            }
            let mut guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.parked.fetch_add(1, Ordering::SeqCst);
            while s.epoch.load(Ordering::SeqCst) == seen && !s.shutdown.load(Ordering::SeqCst) {
                guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            s.parked.fetch_sub(1, Ordering::SeqCst);
            idle_since = Instant::now();
        }
        // SAFETY: written before `epoch` was bumped; the owner keeps `f`
        // alive until `running` reaches 0.
        let (job, n) = unsafe { *s.job.get() };
        let f = unsafe { &*job };
        if catch_unwind(AssertUnwindSafe(|| {
            (index..n).step_by(threads).for_each(f);
        }))
        .is_err()
        {
            s.panicked.store(true, Ordering::SeqCst);
        }
        s.running.fetch_sub(1, Ordering::Release);
    }
}

/// `f(t)` for `t` in `0..n`, on the installed [`SpinPool`] where there is
/// one, else on rayon (by `rayon::join`, which keeps its jobs on the stack).
pub(crate) fn for_each_thread(n: usize, f: impl Fn(usize) + Sync) {
    let pool = CURRENT.with(Cell::get);
    if !pool.is_null() {
        // SAFETY: `install` keeps the pool alive while it is current.
        return unsafe { &*pool }.run(n, &f);
    }
    fn split(range: std::ops::Range<usize>, f: &(impl Fn(usize) + Sync)) {
        if range.len() <= 1 {
            range.for_each(f);
            return;
        }
        let mid = range.start + range.len() / 2;
        rayon::join(|| split(range.start..mid, f), || split(mid..range.end, f));
    }
    split(0..n, &f)
}

/// Threads [`for_each_thread`] has on this thread.
pub(crate) fn current_threads() -> usize {
    let pool = CURRENT.with(Cell::get);
    if pool.is_null() {
        rayon::current_num_threads()
    } else {
        // SAFETY: as in `for_each_thread`.
        unsafe { &*pool }.threads()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_once_and_panics_reach_the_caller() {
        let pool = SpinPool::new(3).unwrap();
        for n in [0, 1, 2, 3, 7, 64] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.install(|| {
                for_each_thread(n, |i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                })
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "n = {n}"
            );
        }
        // After the workers parked, regions still run.
        while pool.shared.parked.load(Ordering::SeqCst) < pool.threads() - 1 {
            std::thread::yield_now();
        }
        let sum = AtomicUsize::new(0);
        pool.install(|| {
            for_each_thread(5, |i| {
                sum.fetch_add(i, Ordering::Relaxed);
            })
        });
        assert_eq!(sum.load(Ordering::Relaxed), 10);
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.install(|| for_each_thread(4, |i| assert_ne!(i, 2, "index 2 fails")))
        }));
        assert!(result.is_err());
        // The pool survives a panicking region.
        let sum = AtomicUsize::new(0);
        pool.install(|| {
            for_each_thread(4, |i| {
                sum.fetch_add(i, Ordering::Relaxed);
            })
        });
        assert_eq!(sum.load(Ordering::Relaxed), 6);
    }
}
