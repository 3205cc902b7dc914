//! Random v4 UUIDs for the ids the server makes itself (call_ids, a dispatcher's principal, a
//! challenge's id, the client's retry jitter). The bytes come from the OS a batch at a time: one
//! `getrandom` call serves [`BATCH`] ids on a thread, so a call without a client-supplied id
//! costs no syscall of its own, and the server needs no userspace generator (uuid's `fast-rng`
//! brought rand, chacha20, rand_core and a third getrandom into every build). Setting six bits
//! and writing 32 hex digits is all the server needs of a UUID, so it has no UUID crate.

use std::cell::RefCell;
use std::fmt;

/// Ids per refill: 512 bytes from the OS at a time.
pub const BATCH: usize = 32;

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
#[doc(hidden)]
pub fn uuid_v4() -> Uuid {
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
        Uuid::v4(bytes)
    })
}

/// A version 4 UUID (RFC 9562): 122 random bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[doc(hidden)]
pub struct Uuid([u8; 16]);

impl Uuid {
    /// Random bytes made a UUID: the version (4) and the variant (`10`) take six of their bits.
    fn v4(mut bytes: [u8; 16]) -> Uuid {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// `67e55044-10b1-426f-9247-bb680e5fe0c8`: the form ids take on the wire.
    #[doc(hidden)]
    pub fn hyphenated(self) -> String {
        self.hex(true)
    }

    /// `67e5504410b1426f9247bb680e5fe0c8`: no hyphens, for ids inside other names.
    #[doc(hidden)]
    pub fn simple(self) -> String {
        self.hex(false)
    }

    /// The client's retry jitter.
    pub fn as_u128(self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    fn hex(self, hyphens: bool) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 36];
        let mut at = 0;
        for (i, byte) in self.0.iter().enumerate() {
            if hyphens && matches!(i, 4 | 6 | 8 | 10) {
                text[at] = b'-';
                at += 1;
            }
            text[at] = DIGITS[usize::from(byte >> 4)];
            text[at + 1] = DIGITS[usize::from(byte & 0x0f)];
            at += 2;
        }
        std::str::from_utf8(&text[..at])
            .expect("hex digits and hyphens are ASCII")
            .to_owned()
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hyphenated())
    }
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
            let text = id.hyphenated();
            // xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx
            assert_eq!(text.as_bytes()[14], b'4', "{text}");
            assert!(
                matches!(text.as_bytes()[19], b'8' | b'9' | b'a' | b'b'),
                "{text}"
            );
            assert!(seen.insert(*id), "{id} came twice");
        }
    }

    #[test]
    fn ids_are_written_as_rfc_9562_says() {
        let id = Uuid::v4(*b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff");
        assert_eq!(id.hyphenated(), "00112233-4455-4677-8899-aabbccddeeff");
        assert_eq!(id.to_string(), id.hyphenated());
        assert_eq!(id.simple(), "00112233445546778899aabbccddeeff");
        assert_eq!(id.as_u128(), 0x00112233_4455_4677_8899_aabbccddeeff);
        // The version and variant bits are set whatever the random bytes held.
        let id = Uuid::v4([0xff; 16]);
        assert_eq!(id.hyphenated(), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(
            Uuid::v4([0; 16]).simple(),
            "00000000000040008000000000000000"
        );
    }
}
