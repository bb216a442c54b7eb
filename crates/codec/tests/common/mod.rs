//! Helpers shared by the codec training tests.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use voxspec_train::{StepReport, TrainObserver};

/// Flex's RNG is process-global and Burn initialises parameters lazily, so a test running
/// beside another one gets different weights: tests that seed the RNG and build a model hold
/// this lock.
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the lock until dropped (a poisoned lock is taken over: one failed test must not fail
/// the others).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The logged values of every step; fails the test on a skipped (non-finite) step.
#[derive(Default)]
pub struct Record(pub Vec<BTreeMap<String, f64>>);

impl TrainObserver for Record {
    fn on_step(&mut self, report: &StepReport) {
        assert!(!report.skipped, "step {} skipped", report.step);
        self.0.push(report.values.clone());
    }
}
