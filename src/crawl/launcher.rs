//! The launcher: the task that starts a fetch task for each URL the driver hands out, and
//! keeps those tasks until they end.
//!
//! The driver does not spawn fetch tasks itself: a spawn from its thread (not one of the
//! runtime's workers) goes through the runtime's shared injection queue and wakes a parked
//! worker. The launcher is a task on a worker, so its spawns go to that worker's own queue,
//! where the others steal them when idle.
//!
//! # Handing a round over without waking anyone
//! The driver puts each round of hand-outs in a shared list ([`Launcher::hand_out`]) and
//! wakes the launcher only when it has to. The launcher already wakes whenever one of its
//! tasks ends (its [`JoinSet`] tells it, on the worker where the task ended: a local
//! wake-up, no system call), and each time it wakes it starts whatever waits in the list.
//! So while enough tasks run, one of them ends soon and the round is picked up for free.
//! Waking the launcher from the driver's thread was a `futex` wake of a parked worker and
//! an interrupt to its core (6% of the driver's CPU in the crawl bench's profile, ~18 µs
//! each on this VM).
//!
//! What bounds the wait, so that a round is never stuck behind slow fetches:
//! - with fewer than [`PICKUP_RUNNING`] tasks running the driver wakes the launcher at once
//!   (few tasks, so no end may come soon; and a crawl that starts, or runs few fetches,
//!   pays a wake-up per round as before);
//! - otherwise the driver looks every [`PICKUP_CHECK`] while a round handed over without a
//!   wake-up may wait ([`Launcher::may_wait`]), and wakes the launcher when a round waits
//!   and the launcher has taken nothing since its last look ([`Launcher::check_pickup`]):
//!   no task ended in a whole period. A round so waits 2 × `PICKUP_CHECK` at most.
//!
//! The look is a periodic tick rather than a deadline per round: a timer set for each
//! round, earlier than any other, had the runtime's time driver wake a parked worker to
//! re-arm its sleep each time (a write to its event fd from the driver's thread, 0.04 a
//! page: the cost moved, not removed). A tick re-arms once per period.
//!
//! So a URL handed out is started within 2 × `PICKUP_CHECK` at worst, and at
//! `crawl.concurrency` 64 and ~17,000 pages/s (a task ending every ~60 µs) in tens of µs.
//! Nothing else changes: the frontier counts a URL in flight from its hand-out, so the
//! concurrency limit holds whether it has started yet or not, and a URL handed out and not
//! started when the crawl stops is not recorded, like one in flight (fetched again on
//! resume).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::fetch_task::{fetch_task, robots_task, FetchShared};
use super::handoffs::{self, Handoff};
use crate::frontier::{Dispatch, RobotsFetch};

/// Below this many tasks running, a round is handed over with a wake-up at once.
const PICKUP_RUNNING: usize = 8;

/// How often the driver looks for a round no task's end picked up, while one may wait.
const PICKUP_CHECK: Duration = Duration::from_millis(20);

/// A dispatched URL for the launcher to start a task for.
pub(super) enum Launch {
    Fetch(Dispatch),
    Robots(RobotsFetch),
}

/// What the driver and the launcher share (`T` is [`Launch`] but in the tests).
struct Shared<T> {
    /// Hand-outs not started yet, in the order handed out.
    waiting: Mutex<Vec<T>>,
    /// Whether `waiting` has any: the launcher looks here before taking the lock.
    any_waiting: AtomicBool,
    /// How many tasks the launcher has running.
    running: AtomicUsize,
    /// How many times the launcher took what was waiting.
    taken: AtomicU64,
}

impl<T> Shared<T> {
    fn new() -> Shared<T> {
        Shared {
            waiting: Mutex::new(Vec::new()),
            any_waiting: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
        }
    }
}

/// The driver's side of the launcher. Dropping it (the crawl is over, or a stop's grace ran
/// out) ends the launcher, and the tasks still running are aborted with its set.
pub(super) struct Launcher<T = Launch> {
    shared: Arc<Shared<T>>,
    wake: mpsc::UnboundedSender<()>,
    /// Whether a round was handed out without a wake-up and may still wait.
    may_wait: bool,
    /// The launcher's [`Shared::taken`] at the last look that saw a round waiting.
    taken_at_last_look: Option<u64>,
    /// The looks' period: one timer re-armed once a period (see the module doc).
    looks: tokio::time::Interval,
}

impl Launcher {
    /// Starts the launcher task on the current runtime.
    pub(super) fn start(fetch: Arc<FetchShared>) -> Launcher {
        let shared = Arc::new(Shared::new());
        let (wake, wakes) = mpsc::unbounded_channel();
        tokio::spawn(run(fetch, shared.clone(), wakes));
        Launcher::with(shared, wake)
    }
}

impl<T> Launcher<T> {
    /// The driver's side of `shared`, waking the launcher through `wake`.
    fn with(shared: Arc<Shared<T>>, wake: mpsc::UnboundedSender<()>) -> Launcher<T> {
        let mut looks = tokio::time::interval(PICKUP_CHECK);
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Launcher {
            shared,
            wake,
            may_wait: false,
            taken_at_last_look: None,
            looks,
        }
    }

    /// Hands `round` (left empty) to the launcher, waking it only if no task's end is
    /// likely to come soon (see the module doc).
    pub(super) fn hand_out(&mut self, round: &mut Vec<T>) {
        if round.is_empty() {
            return;
        }
        handoffs::count(Handoff::Spawn, 1);
        {
            // Poisoned only by a panic while holding it, which neither side can do.
            let mut waiting = self
                .shared
                .waiting
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            waiting.append(round);
            self.shared.any_waiting.store(true, Ordering::Release);
        }
        if self.shared.running.load(Ordering::Relaxed) < PICKUP_RUNNING {
            self.wake_launcher();
        } else {
            self.may_wait = true;
        }
    }

    /// The driver's periodic look ([`Launcher::next_look`]): a
    /// round waiting while the launcher has taken nothing since the last look is handed
    /// over with a wake-up.
    pub(super) fn check_pickup(&mut self) {
        if !self.shared.any_waiting.load(Ordering::Acquire) {
            self.may_wait = false;
            self.taken_at_last_look = None;
            return;
        }
        let taken = self.shared.taken.load(Ordering::Acquire);
        if self.taken_at_last_look == Some(taken) {
            self.wake_launcher();
        } else {
            self.taken_at_last_look = Some(taken);
        }
    }

    /// Whether a round handed out without a wake-up may still wait: the driver then awaits
    /// [`Launcher::next_look`].
    pub(super) fn may_wait(&self) -> bool {
        self.may_wait
    }

    /// The next look, every [`PICKUP_CHECK`] ([`Launcher::check_pickup`]). The driver
    /// awaits it only while [`Launcher::may_wait`].
    pub(super) async fn next_look(&mut self) {
        self.looks.tick().await;
        self.check_pickup();
    }

    fn wake_launcher(&mut self) {
        self.may_wait = false;
        self.taken_at_last_look = None;
        // The launcher ends only with the crawl (or a panic: then the fetches never come
        // back and the stop's grace ends the crawl).
        let _ = self.wake.send(());
    }
}

/// The launcher task: starts what waits whenever it wakes (a task ended, or the driver
/// woke it), until the driver drops its [`Launcher`].
async fn run(
    fetch: Arc<FetchShared>,
    shared: Arc<Shared<Launch>>,
    mut wakes: mpsc::UnboundedReceiver<()>,
) {
    let mut tasks = JoinSet::new();
    loop {
        if shared.any_waiting.load(Ordering::Acquire) {
            let round = {
                let mut waiting = shared
                    .waiting
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                shared.any_waiting.store(false, Ordering::Release);
                shared.taken.fetch_add(1, Ordering::Release);
                std::mem::take(&mut *waiting)
            };
            for launch in round {
                // The set's bookkeeping takes its mutex, on this worker.
                handoffs::count(Handoff::Lock, 1);
                match launch {
                    Launch::Fetch(dispatch) => tasks.spawn(fetch_task(fetch.clone(), dispatch)),
                    Launch::Robots(robots) => tasks.spawn(robots_task(fetch.clone(), robots)),
                };
            }
            shared.running.store(tasks.len(), Ordering::Relaxed);
        }
        tokio::select! {
            wake = wakes.recv() => {
                if wake.is_none() {
                    break;
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                handoffs::count(Handoff::Lock, 1);
                shared.running.store(tasks.len(), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launcher of numbers with `running` tasks, and no task behind it: its wake-ups are
    /// what the tests see.
    fn launcher_without_task(running: usize) -> (Launcher<u32>, mpsc::UnboundedReceiver<()>) {
        let (wake, wakes) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new());
        shared.running.store(running, Ordering::Relaxed);
        let launcher = Launcher::with(shared, wake);
        (launcher, wakes)
    }

    #[tokio::test]
    async fn few_tasks_running_wake_the_launcher_at_once() {
        let (mut launcher, mut wakes) = launcher_without_task(PICKUP_RUNNING - 1);
        launcher.hand_out(&mut vec![1]);
        assert!(wakes.try_recv().is_ok());
        assert!(!launcher.may_wait());
    }

    #[tokio::test]
    async fn a_round_not_picked_up_by_the_next_look_wakes_the_launcher() {
        let (mut launcher, mut wakes) = launcher_without_task(PICKUP_RUNNING);
        let mut round = vec![1, 2];
        launcher.hand_out(&mut round);
        launcher.hand_out(&mut vec![3]);
        assert!(round.is_empty());
        assert!(
            wakes.try_recv().is_err(),
            "many tasks running: no wake-up yet"
        );
        assert!(launcher.may_wait());
        assert_eq!(*launcher.shared.waiting.lock().unwrap(), vec![1, 2, 3]);
        // The first look sees it waiting; the next, a period later, with nothing taken
        // between them, wakes the launcher.
        launcher.check_pickup();
        assert!(wakes.try_recv().is_err());
        assert!(launcher.may_wait());
        launcher.check_pickup();
        assert!(wakes.try_recv().is_ok());
        assert!(!launcher.may_wait());
    }

    #[tokio::test]
    async fn the_looks_come_every_period_and_the_second_wakes_the_launcher() {
        let (mut launcher, mut wakes) = launcher_without_task(PICKUP_RUNNING);
        launcher.hand_out(&mut vec![1]);
        let start = tokio::time::Instant::now();
        launcher.next_look().await;
        assert!(
            wakes.try_recv().is_err(),
            "the first look only notes the round"
        );
        launcher.next_look().await;
        assert!(
            start.elapsed() >= PICKUP_CHECK,
            "the second look a period later"
        );
        assert!(wakes.try_recv().is_ok());
        assert!(!launcher.may_wait());
    }

    #[tokio::test]
    async fn a_launcher_taking_rounds_is_not_woken_while_rounds_keep_coming() {
        let (mut launcher, mut wakes) = launcher_without_task(PICKUP_RUNNING);
        for round in 0..5 {
            launcher.hand_out(&mut vec![round]);
            launcher.check_pickup();
            // Tasks ended during the period: the launcher took the round (and may see a
            // new one handed out before the next look).
            launcher.shared.taken.fetch_add(1, Ordering::Release);
        }
        assert!(wakes.try_recv().is_err());
        assert!(launcher.may_wait());
    }

    #[tokio::test]
    async fn a_round_picked_up_by_a_task_end_needs_no_wake_up() {
        let (mut launcher, mut wakes) = launcher_without_task(PICKUP_RUNNING);
        launcher.hand_out(&mut vec![1]);
        // What the launcher does when a task's end wakes it.
        launcher.shared.any_waiting.store(false, Ordering::Release);
        launcher.check_pickup();
        assert!(wakes.try_recv().is_err());
        assert!(!launcher.may_wait());
    }
}
