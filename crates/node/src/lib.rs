//! One xarchive domain.
