//! What `neardup fingerprint` prints for one article, and `POST /v1/fingerprint` answers: one
//! shape, made in one place.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::Sketches;

/// One article's fingerprints. `simhash` and `minhash` are always present (null when the text
/// is too short); the SimHash fields come first, as they always have (scripts and indices
/// depend on them), and `reason`/`detail` say why SimHash has none.
#[derive(Clone, Debug, Serialize)]
pub struct FingerprintRecord {
    pub id: Value,
    /// 16 hex digits.
    pub simhash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub u64: Option<u64>,
    /// The four 16-bit blocks as signed integers, highest first (the `simHashA`–`D` values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<[i16; 4]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The MinHash signature: its minima, in order.
    pub minhash: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minhash_version: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minhash_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minhash_detail: Option<String>,
}

impl FingerprintRecord {
    /// The record of `sketches` (both methods asked for; a method not computed reads as null).
    pub fn new(id: Value, sketches: &Sketches) -> FingerprintRecord {
        let mut r = FingerprintRecord {
            id,
            simhash: None,
            u64: None,
            blocks: None,
            version: None,
            reason: None,
            detail: None,
            minhash: None,
            minhash_version: None,
            minhash_reason: None,
            minhash_detail: None,
        };
        match &sketches.simhash {
            Some(Ok(f)) => {
                r.simhash = Some(f.simhash.to_hex());
                r.u64 = Some(f.simhash.0);
                r.blocks = Some(f.simhash.blocks16());
                r.version = Some(f.version.clone());
            }
            Some(Err(why)) => {
                r.reason = Some(why.code());
                r.detail = Some(why.to_string());
            }
            None => {}
        }
        match &sketches.minhash {
            Some(Ok(m)) => {
                r.minhash = Some(m.signature.values().to_vec());
                r.minhash_version = Some(m.version.clone());
            }
            Some(Err(why)) => {
                r.minhash_reason = Some(why.code());
                r.minhash_detail = Some(why.to_string());
            }
            None => {}
        }
        r
    }
}
