//! A fork-join team for the engine's short parallel sections: helper threads that spin
//! between sections instead of sleeping.
//!
//! A decoding step of a small model is ~50 products of 2–60 µs each. Rayon parks its idle
//! workers, and waking one costs about as much as the small products themselves (a 256 × 1024
//! product at M = 1 took 13 µs on one thread and 26 µs split over two through rayon), so the
//! engine used to run them on one core. Here a section is published by one atomic store that
//! the helpers are already polling, and its tasks are claimed from one atomic word, so the
//! handoff costs a few hundred nanoseconds:
//!
//! ```text
//! caller:  publish (epoch, tasks) ── claim 0 ── run ── claim 2 ── run ── wait until done = tasks
//! helper:     spin ─┘  claim 1 ── run ── claim (none left) ── spin … (park after SPIN idle)
//! ```
//!
//! Tasks are claimed, not assigned: a helper that is late (parked, or its core taken by another
//! process) leaves its share to the caller instead of holding the section up. A helper parks
//! after [`SPIN`] without work, so an idle engine leaves the cores alone. The team has one
//! helper per thread of rayon's pool but one, so `--threads N` bounds it as it bounds rayon.
//! One caller at a time uses the team; a second concurrent caller (another thread decoding, or
//! a task of a section that starts a section itself) runs its tasks on its own thread.

use std::any::Any;
use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// How long a helper polls for the next section before it parks. A decoding step's host work
/// (sampling, Viterbi, cache bookkeeping) between two steps is well below this.
pub const SPIN: Duration = Duration::from_micros(500);
/// Most helper threads (the team has one per core but one, at most this many).
const MAX_HELPERS: usize = 15;
/// Tasks per section, at most (16 bits of the state word).
const MAX_TASKS: usize = 0xFFFF;

/// A section's work: called once with each task index `0..tasks`, from any team thread.
type Job = dyn Fn(usize) + Sync;

struct Team {
    /// `epoch << 32 | tasks << 16 | next task`: one word, so a claim (a compare-exchange on it)
    /// can only succeed for the section it read the task count of.
    state: AtomicU64,
    /// Tasks of the current section that have finished.
    done: AtomicUsize,
    /// The current section's work, written by the caller before it publishes the section and
    /// read by a thread only after it claimed a task of it.
    job: UnsafeCell<Option<*const Job>>,
    /// The first panic of the current section, resumed on the caller's thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Held by the one caller that is using the team.
    busy: AtomicBool,
    /// The last epoch published (only the holder of `busy` writes it).
    epoch: AtomicU32,
    /// Per helper: parked (or about to park), so the caller unparks it.
    sleeping: Vec<AtomicBool>,
    threads: OnceLock<Vec<Thread>>,
    start: Once,
}

// SAFETY: `job` is written only by the holder of `busy`, while no task of a section is running
// (before publishing it, after all its tasks finished), and read only by a thread that claimed
// a task of the published section (the claim's acquire orders the read after the write).
unsafe impl Sync for Team {}
// SAFETY: as for Sync; the job pointer is only dereferenced under the same protocol.
unsafe impl Send for Team {}

/// The helper threads there are: one per thread of rayon's pool but one (the CLI's `--threads`,
/// `RAYON_NUM_THREADS`, else one per core), at most 15; fixed at the first use.
pub fn helpers() -> usize {
    team().map_or(0, |t| t.sleeping.len())
}

fn team() -> Option<&'static Team> {
    static TEAM: OnceLock<Option<Team>> = OnceLock::new();
    let team = TEAM
        .get_or_init(|| {
            // As many threads as rayon's pool (`--threads`, `RAYON_NUM_THREADS`, else the cores).
            let helpers = rayon::current_num_threads()
                .saturating_sub(1)
                .min(MAX_HELPERS);
            (helpers > 0).then(|| Team {
                state: AtomicU64::new(0),
                done: AtomicUsize::new(0),
                job: UnsafeCell::new(None),
                panic: Mutex::new(None),
                busy: AtomicBool::new(false),
                epoch: AtomicU32::new(0),
                sleeping: (0..helpers).map(|_| AtomicBool::new(false)).collect(),
                threads: OnceLock::new(),
                start: Once::new(),
            })
        })
        .as_ref()?;
    team.start.call_once(|| {
        let mut threads = Vec::with_capacity(team.sleeping.len());
        for me in 0..team.sleeping.len() {
            match thread::Builder::new()
                .name(format!("voxspec-engine-{me}"))
                .spawn(move || team.helper(me))
            {
                Ok(handle) => threads.push(handle.thread().clone()),
                // Without the thread the team still works: its tasks go to the others.
                Err(_) => break,
            }
        }
        let _ = team.threads.set(threads);
    });
    Some(team)
}

/// Runs `f(0)`, `f(1)`, …, `f(tasks - 1)`, each once, on this thread and the team's helpers,
/// and returns when all have finished. A panic in a task is resumed here after the others
/// finished. With no helpers, or while another thread uses the team, the tasks run here in
/// order.
pub fn run(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    // Inside a one-thread rayon pool (`--threads 1`, or one installed to measure one core) the
    // caller works alone.
    if !(2..=MAX_TASKS).contains(&tasks) || rayon::current_num_threads() <= 1 {
        return (0..tasks).for_each(f);
    }
    let Some(team) = team() else {
        return (0..tasks).for_each(f);
    };
    if team.busy.swap(true, Ordering::Acquire) {
        return (0..tasks).for_each(f);
    }
    // SAFETY: the lifetime is erased for the section only: `run` returns (or unwinds, below)
    // only after `done == tasks`, i.e. after every call of `f` returned, and the pointer is
    // cleared before that; no thread reads `job` without first claiming one of these tasks.
    let job = unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const Job>(f) };
    // SAFETY: we hold `busy` and no task is running (see `Team`'s Sync).
    unsafe { *team.job.get() = Some(job) };
    team.done.store(0, Ordering::Relaxed);
    // Epoch 0 is never published (helpers start with it as seen), also when the count wraps.
    let epoch = team.epoch.load(Ordering::Relaxed).wrapping_add(1).max(1);
    team.epoch.store(epoch, Ordering::Relaxed);
    // SeqCst with the helpers' `sleeping` flags: either a helper sees this section before it
    // parks, or we see it parked and unpark it.
    team.state.store(
        (u64::from(epoch) << 32) | ((tasks as u64) << 16),
        Ordering::SeqCst,
    );
    if let Some(threads) = team.threads.get() {
        for (sleeping, thread) in team.sleeping.iter().zip(threads) {
            if sleeping.load(Ordering::SeqCst) {
                thread.unpark();
            }
        }
    }
    team.work(epoch);
    while team.done.load(Ordering::Acquire) < tasks {
        spin_loop();
    }
    // SAFETY: every task of the section finished (acquire above); see `Team`'s Sync.
    unsafe { *team.job.get() = None };
    let panic = team.panic.lock().map(|mut p| p.take()).unwrap_or(None);
    team.busy.store(false, Ordering::Release);
    if let Some(payload) = panic {
        panic::resume_unwind(payload);
    }
}

impl Team {
    /// Claims and runs tasks of section `epoch` until none is left.
    fn work(&self, epoch: u32) {
        loop {
            let state = self.state.load(Ordering::Acquire);
            let (tasks, next) = ((state >> 16) & 0xFFFF, state & 0xFFFF);
            if (state >> 32) as u32 != epoch || next >= tasks {
                return;
            }
            if self
                .state
                .compare_exchange_weak(state, state + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // SAFETY: task `next` of this section is ours and unfinished, so the caller is
            // waiting and `job` holds this section's work (see `Team`'s Sync).
            if let Some(job) = unsafe { *self.job.get() } {
                // SAFETY: the caller keeps `f` alive until this task is counted done.
                let f = unsafe { &*job };
                if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| f(next as usize)))
                    && let Ok(mut first) = self.panic.lock()
                {
                    first.get_or_insert(payload);
                }
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// A helper thread: polls for sections, works on them, parks after [`SPIN`] without one.
    fn helper(&self, me: usize) {
        // Epoch 0 is never published: a helper that starts after the first section was
        // published still joins it.
        let mut seen = 0;
        loop {
            let mut idle_since: Option<Instant> = None;
            let mut polls = 0u32;
            loop {
                let epoch = (self.state.load(Ordering::Acquire) >> 32) as u32;
                if epoch != seen {
                    seen = epoch;
                    break;
                }
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(128)
                    && idle_since.get_or_insert_with(Instant::now).elapsed() > SPIN
                {
                    self.sleeping[me].store(true, Ordering::SeqCst);
                    if (self.state.load(Ordering::SeqCst) >> 32) as u32 == seen {
                        thread::park();
                    }
                    self.sleeping[me].store(false, Ordering::SeqCst);
                    idle_since = None;
                }
                spin_loop();
            }
            self.work(seen);
        }
    }
}

/// A mutable buffer that the tasks of one section write in disjoint ranges.
pub struct Disjoint<'a> {
    ptr: *mut f32,
    len: usize,
    _buffer: PhantomData<&'a mut [f32]>,
}

// SAFETY: the tasks only reach the buffer through `range`, whose contract keeps them apart.
unsafe impl Send for Disjoint<'_> {}
// SAFETY: as above.
unsafe impl Sync for Disjoint<'_> {}

impl<'a> Disjoint<'a> {
    /// Shares `buffer` with the tasks of a section.
    pub fn new(buffer: &'a mut [f32]) -> Self {
        Self {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
            _buffer: PhantomData,
        }
    }

    /// Values `offset .. offset + len` of the buffer.
    ///
    /// # Safety
    /// No other task touches these values while the returned slice lives.
    ///
    /// # Panics
    /// When the range is outside the buffer (an engine bug).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, offset: usize, len: usize) -> &mut [f32] {
        assert!(
            offset + len <= self.len,
            "range {offset}+{len} of a buffer of {}",
            self.len
        );
        // SAFETY: inside the buffer (asserted), which outlives `self`; exclusive by the contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Every task runs exactly once, for task counts from none to many more than threads, in
    /// sections back to back and after the helpers have parked.
    #[test]
    fn every_task_runs_once() {
        for round in 0..3 {
            for tasks in [0, 1, 2, 3, 7, 64, 1000] {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                run(tasks, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                for (i, h) in hits.iter().enumerate() {
                    assert_eq!(
                        h.load(Ordering::Relaxed),
                        1,
                        "round {round}, {tasks} tasks: task {i}"
                    );
                }
            }
            thread::sleep(SPIN * 3);
        }
    }

    /// Several threads using the team at once (one gets it, the others run alone), and a task
    /// that starts a section itself: all tasks still run once each.
    #[test]
    fn concurrent_and_nested_sections() {
        let total = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        run(8, &|_| {
                            run(3, &|_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 8 * 3);
    }

    /// A panicking task reaches the caller with its own message, only once no task is running
    /// any more (the tasks borrow the caller's stack), and the team works afterwards.
    #[test]
    fn a_panic_reaches_the_caller_after_the_other_tasks() {
        let inside = AtomicUsize::new(0);
        let caller = thread::current().id();
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            run(16, &|i| {
                inside.fetch_add(1, Ordering::SeqCst);
                if i == 5 {
                    inside.fetch_sub(1, Ordering::SeqCst);
                    panic!("task five failed");
                }
                // The helpers' tasks outlast the caller's, so the caller runs out of tasks to
                // claim while a helper is still inside one.
                let ms = if thread::current().id() == caller {
                    1
                } else {
                    20
                };
                thread::sleep(Duration::from_millis(ms));
                inside.fetch_sub(1, Ordering::SeqCst);
            })
        }));
        assert_eq!(inside.load(Ordering::SeqCst), 0, "a task was still running");
        let payload = caught.expect_err("the panic is resumed");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"task five failed"));
        let after = AtomicUsize::new(0);
        run(4, &|_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 4);
    }

    /// Inside a one-thread rayon pool (what `--threads 1` sets up) every task runs on the
    /// caller's thread.
    #[test]
    fn a_one_thread_pool_keeps_the_tasks_on_the_caller() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool");
        pool.install(|| {
            let caller = thread::current().id();
            let elsewhere = AtomicUsize::new(0);
            run(64, &|_| {
                if thread::current().id() != caller {
                    elsewhere.fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_micros(50));
            });
            assert_eq!(elsewhere.load(Ordering::Relaxed), 0);
        });
    }

    /// On a machine with more than one core the helpers really take tasks: in a two-task
    /// section each task waits (up to a second) until both are running at once. Tried a few
    /// times, since another test running at the same time may hold the team.
    #[test]
    fn helpers_run_tasks_concurrently() {
        if helpers() == 0 {
            eprintln!("one core: no helper threads to test");
            return;
        }
        let together = (0..20).any(|_| {
            let inside = AtomicUsize::new(0);
            let met = AtomicBool::new(false);
            run(2, &|_| {
                inside.fetch_add(1, Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(1);
                while Instant::now() < deadline {
                    if inside.load(Ordering::SeqCst) == 2 {
                        met.store(true, Ordering::SeqCst);
                        break;
                    }
                    spin_loop();
                }
            });
            met.load(Ordering::SeqCst)
        });
        assert!(
            together,
            "the two tasks of a section never ran at the same time"
        );
    }
}
