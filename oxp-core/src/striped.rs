//! [`Striped`]: a counter spread over cache lines, one per thread (modulo [`STRIPES`]). Every
//! call counts several times (the gate, the metrics), and one shared line would bounce between
//! the cores on each count.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How many lines a counter is spread over.
pub const STRIPES: usize = 8;

/// A stripe may wrap below zero (a call admitted on one thread can end on another); the
/// wrapping sum is exact.
#[derive(Default)]
#[doc(hidden)]
pub struct Striped([Line; STRIPES]);

#[derive(Default)]
#[repr(align(128))]
struct Line(AtomicU64);

impl Striped {
    pub(crate) fn add(&self, n: u64) {
        self.0[stripe()].0.fetch_add(n, Ordering::SeqCst);
    }

    #[doc(hidden)]
    pub fn sum(&self) -> u64 {
        self.0.iter().fold(0, |sum, line| {
            sum.wrapping_add(line.0.load(Ordering::SeqCst))
        })
    }
}

impl std::fmt::Debug for Striped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Striped({})", self.sum())
    }
}

/// This thread's stripe, handed out round-robin as threads first count.
pub(crate) fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|stripe| *stripe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_striped_count_is_exact_across_threads() {
        let counter = Striped::default();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| (0..1000).for_each(|_| counter.add(1)));
                // Decrements on other threads than the increments: stripes go below zero.
                scope.spawn(|| (0..1000).for_each(|_| counter.add(u64::MAX)));
            }
        });
        assert_eq!(counter.sum(), 0);
        (0..5).for_each(|_| counter.add(1));
        assert_eq!(counter.sum(), 5);
    }
}
