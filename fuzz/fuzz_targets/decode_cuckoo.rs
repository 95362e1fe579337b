//! `CuckooFilter::decode` (XACK) on arbitrary bytes, and on the same bytes
//! with the CRC trailer made valid. A decoded filter must re-encode to the
//! exact input bytes and survive every operation; its change log must bring
//! a copy up to date.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xarchive_filter::CuckooFilter;
use xarchive_filter_fuzz::{as_is_and_resealed, decode_bounded, HEADER_LEN, ID};

/// Body offset of the generator state, which a delta does not carry.
const RNG: usize = HEADER_LEN + 40;

fuzz_target!(|data: &[u8]| as_is_and_resealed(data, check));

fn check(data: &[u8]) {
    let Some(mut f) = decode_bounded(data, 1, CuckooFilter::decode) else {
        return;
    };
    assert_eq!(f.encode(), data, "XACK must round-trip byte for byte");
    let copy = f.clone();

    let _ = (f.contains(ID), f.count(ID), f.load_factor(), f.is_full());
    let v0 = f.version();
    let count = f.count(ID);
    match f.insert(ID) {
        Ok(()) => {
            assert!(f.contains(ID));
            assert!(f.count(ID) > count || f.is_full());
            f.remove(ID).expect("an ID just inserted can be removed");
        }
        Err(_) => {
            assert!(copy.is_full());
            assert_eq!(f.encode(), data, "a refused insert changes nothing");
        }
    }
    let _ = f.insert("another ID");
    let _ = f.remove("some other ID");
    let v = f.version();
    f.touch();
    assert!(f.version() >= v);

    // Without a victim along the way the change log covers everything
    // (unless the filter is at the last version, where versions saturate).
    if let (true, Ok(delta)) = (v0 != u64::MAX, f.changes_since(v0)) {
        let mut copy = copy;
        copy.apply(&delta)
            .expect("the delta fits the copy it came from");
        let (mut a, mut b) = (copy.encode(), f.encode());
        let n = a.len() - 4;
        a[RNG..RNG + 8].fill(0);
        b[RNG..RNG + 8].fill(0);
        assert_eq!(a[..n], b[..n], "slots, victim and versions agree");
        assert_eq!(copy.items(), f.items());
    }
}
