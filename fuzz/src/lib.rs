//! Helpers shared by the fuzz targets and the seed-corpus builder.
//!
//! - [`as_is_and_resealed`]: random mutations almost never keep the CRC32C
//!   trailer right, so every target also decodes its input with the trailer
//!   recomputed; that is what lets the fuzzer reach the body checks.
//! - [`measure`]: a global allocator that counts live heap bytes, so a
//!   target can assert that a decoder allocated no more than its input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

use xarchive_filter::{BloomGeometry, COUNTER_MAX};

/// The ID every target inserts and removes.
pub const ID: &str = "J001-WS·2023-Y-0001";

/// The IDs the seed corpus inserts (`seed_ids(n)` are the first n): the
/// targets remove them, so mutated counters of held IDs are exercised.
pub fn seed_ids(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(|i| format!("J{:03}-WS·2023-Y-{i:04}", i % 7))
}

/// Envelope header (magic, version, reserved) and CRC trailer lengths.
pub const HEADER_LEN: usize = 8;
pub const TRAILER_LEN: usize = 4;

/// Runs `check` on `data`, then on `data` with a valid CRC trailer if that
/// is different.
pub fn as_is_and_resealed(data: &[u8], check: impl Fn(&[u8])) {
    check(data);
    if let Some(fixed) = with_valid_crc(data) {
        check(&fixed);
    }
}

/// `bytes` with its last four bytes replaced by the CRC32C of the rest, or
/// `None` when it is too short to be an envelope or already carries the
/// right CRC (the target has then decoded it as it is).
fn with_valid_crc(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < HEADER_LEN + TRAILER_LEN {
        return None;
    }
    let mut fixed = bytes.to_vec();
    reseal(&mut fixed);
    (fixed != bytes).then_some(fixed)
}

/// Rewrites the CRC32C trailer of an envelope after an edit.
pub fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - TRAILER_LEN;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Overwrites the little-endian u64 at `offset` and reseals.
pub fn patch_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    reseal(bytes);
}

/// Asserts what removing a held `id` did to a counting filter's counters
/// (`before` and `after`, one per cell): it changed its own counters only,
/// each by at most the number of its probes there, and never a stuck one.
pub fn assert_removal_confined(g: BloomGeometry, id: &str, before: &[u8], after: &[u8]) {
    let p = g.probes(id.as_bytes());
    let hits: Vec<u64> = (0..g.k()).map(|i| p.position(i)).collect();
    for (c, (&b, &a)) in before.iter().zip(after).enumerate() {
        let n = hits.iter().filter(|&&h| h == c as u64).count() as u8;
        let ok = if b == COUNTER_MAX {
            a == b
        } else {
            a <= b && b - a <= n
        };
        assert!(ok, "{id}: counter {c} went from {b} to {a} ({n} probes)");
    }
}

struct Tracking;

static ARMED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: usize) {
    if ARMED.load(Ordering::Relaxed) {
        let now = LIVE.fetch_add(by as isize, Ordering::Relaxed) + by as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn shrank(by: usize) {
    if ARMED.load(Ordering::Relaxed) {
        LIVE.fetch_sub(by as isize, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static TRACKING: Tracking = Tracking;

/// Runs `f` and returns its result with the peak of heap bytes that were
/// allocated during the call and live at some moment (including what the
/// result itself holds). Single-threaded use only.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    let out = f();
    ARMED.store(false, Ordering::Relaxed);
    (out, PEAK.load(Ordering::Relaxed).max(0) as usize)
}

/// Decodes `data` with `decode`, asserting the allocation bound, and
/// returns the value if decoding succeeded. `per_byte` is how many heap
/// bytes the decoded value may take per input byte (1 for the filters).
pub fn decode_bounded<T, E>(
    data: &[u8],
    per_byte: usize,
    decode: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Option<T> {
    let (result, peak) = measure(|| decode(data));
    let limit = data.len() * per_byte;
    assert!(
        peak <= limit,
        "decoding {} bytes allocated {peak} bytes (limit {limit}, ok = {})",
        data.len(),
        result.is_ok()
    );
    result.ok()
}
