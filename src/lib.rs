//! neardup
