//! Random v4 UUIDs for the ids the server makes itself (call_ids, a dispatcher's principal, a
//! challenge's id, the client's retry jitter). The bytes come from the OS a batch at a time: one
//! `getrandom` call serves [`BATCH`] ids on a thread, so a call without a client-supplied id
//! costs no syscall of its own, and the server needs no userspace generator (uuid's `fast-rng`
//! brought rand, chacha20, rand_core and a third getrandom into every build).

use std::cell::RefCell;

/// Ids per refill: 512 bytes from the OS at a time.
const BATCH: usize = 32;

struct Pool {
    bytes: [u8; 16 * BATCH],
    /// The next unused id in `bytes`; `BATCH` when all are used.
    next: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool { bytes: [0; 16 * BATCH], next: BATCH })
    };
}

/// A random (version 4) UUID.
pub(crate) fn uuid_v4() -> uuid::Uuid {
    POOL.with_borrow_mut(|pool| {
        if pool.next == BATCH {
            // uuid's own `new_v4` fails the same way: an OS that cannot give random bytes
            // leaves nothing safe to make ids from.
            getrandom::fill(&mut pool.bytes).expect("the OS's random number generator failed");
            pool.next = 0;
        }
        let used = &mut pool.bytes[pool.next * 16..][..16];
        pool.next += 1;
        let mut bytes = [0; 16];
        bytes.copy_from_slice(used);
        // An id handed out leaves no copy behind to be read with later ones.
        used.fill(0);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_version_4_and_distinct_within_and_across_threads_and_refills() {
        let batch = || (0..BATCH * 5 + 3).map(|_| uuid_v4()).collect::<Vec<_>>();
        let here = batch();
        let there = std::thread::spawn(batch).join().unwrap();
        let mut seen = HashSet::new();
        for id in here.iter().chain(&there) {
            assert_eq!(id.get_version(), Some(uuid::Version::Random), "{id}");
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert!(seen.insert(*id), "{id} came twice");
        }
    }
}
