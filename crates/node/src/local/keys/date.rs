//! Dates as key values carry them: both the identity number and a name
//! with its birth date hold one, and neither may be later than today in China.

use time::{Date, OffsetDateTime, UtcOffset};

/// Value of ASCII digits (already checked to be digits).
pub(super) fn digits_value(ds: &[u8]) -> u32 {
    ds.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'))
}

/// Numbers are issued in China: someone born this morning in Beijing has
/// tomorrow's date by UTC's reckoning for eight hours.
pub(super) fn today_in_china() -> Date {
    let cst = UtcOffset::from_hms(8, 0, 0).unwrap_or(UtcOffset::UTC);
    OffsetDateTime::now_utc().to_offset(cst).date()
}
