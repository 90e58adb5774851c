//! The painless scripts of the server filter. Each is a copy of a rule of the library, run
//! inside Elasticsearch so that only matches cross the network: the Hamming distance of
//! SimHash, the agreeing minima of MinHash ([`super::query::min_agreements`]), and the relation rule
//! ([`neardup_core::relation::MatchRule`]: the b-bit correction, the containment estimate and
//! the minimum-size gate). The client checks every transferred hit again with the rule itself.

/// The painless SimHash filter: the whole fingerprint from the `long` where a document has
/// it, else (documents written by the older Java service, which has no `long`) from the four
/// blocks. `short` block doc values are numbers, `keyword` ones decimal strings.
pub(super) const SCRIPT_LONG_OR_BLOCKS: &str = "long v; \
if (doc[params.f].size() != 0) { v = doc[params.f].value; } else { \
v = 0L; for (String b : params.b) { if (doc[b].size() == 0) { return false; } \
def x = doc[b].value; long l = x instanceof String ? Long.parseLong((String) x) : ((Number) x).longValue(); \
v = (v << 16) | (l & 0xFFFFL); } } \
return Long.bitCount(v ^ params.q) <= params.k;";

/// The painless SimHash filter on the four blocks alone (no `long` doc values in some index).
pub(super) const SCRIPT_BLOCKS: &str = "long v = 0L; for (String b : params.b) { \
if (doc[b].size() == 0) { return false; } \
def x = doc[b].value; long l = x instanceof String ? Long.parseLong((String) x) : ((Number) x).longValue(); \
v = (v << 16) | (l & 0xFFFFL); } \
return Long.bitCount(v ^ params.q) <= params.k;";

/// The painless SimHash filter on the `long` alone (blocks without doc values). A document
/// without the `long` passes, and the client-side check (always applied) decides on its
/// `_source` blocks.
pub(super) const SCRIPT_LONG: &str =
    "doc[params.f].size() == 0 || Long.bitCount(doc[params.f].value ^ params.q) <= params.k";

/// The painless MinHash filter: the `binary` signature doc value holds the signature's
/// little-endian `u32`s; count those equal to the query's (`params.q`, as signed 32-bit
/// integers) and keep the document when at least `params.m` agree ([`min_agreements`]).
/// A signature of another length never matches, as in [`Signature::similarity`].
pub(super) const SCRIPT_MINHASH: &str = "if (doc[params.f].size() == 0) { return false; } \
BytesRef r = doc[params.f].value; List q = params.q; int n = q.size(); \
if (r.length != 4 * n) { return false; } byte[] x = r.bytes; int a = 0; \
for (int i = 0; i < n; i++) { int j = r.offset + 4 * i; \
int b0 = x[j]; int b1 = x[j + 1]; int b2 = x[j + 2]; int b3 = x[j + 3]; \
int v = (b0 & 255) | ((b1 & 255) << 8) | ((b2 & 255) << 16) | (b3 << 24); \
if (v == (int) q.get(i)) { a++; } } \
return a >= params.m;";

/// The painless count of agreeing minima of the compact layout, into `a` (of `n`, on `b`
/// bits), shared by [`SCRIPT_MINHASH_BITS`] and [`SCRIPT_MINHASH_RELATE`]. At 8 bits (the
/// default) each minimum is one byte, read as it is; any other width is unpacked.
macro_rules! count_agreeing_bits {
    () => {
        "if (doc[params.f].size() == 0) { return false; } \
BytesRef r = doc[params.f].value; List q = params.q; int n = q.size(); int b = params.b; \
int w; if (r.length == 4 * n) { w = 32; } else if (r.length == (n * b + 7) / 8) { w = b; } else { return false; } \
byte[] x = r.bytes; int end = r.offset + r.length; long mask = (1L << b) - 1; int a = 0; \
if (w == 8) { for (int i = 0; i < n; i++) { if ((x[r.offset + i] & 255) == ((Number) q.get(i)).longValue()) { a++; } } } else { \
for (int i = 0; i < n; i++) { long at = (long) i * w; int j = r.offset + (int) (at >> 3); \
long acc = 0; for (int k = 0; k < 5 && j + k < end; k++) { acc |= ((long) (x[j + k] & 255)) << (8 * k); } \
if (((acc >>> (int) (at & 7)) & mask) == ((Number) q.get(i)).longValue()) { a++; } } } "
    };
}

/// The painless MinHash filter of the compact layout: the `binary` signature doc value holds
/// the lowest `params.b` bits of each minimum, packed little-endian
/// ([`MinHashLayout::signature_bytes`]), or whole `u32`s in a document written before the
/// index was upgraded to the layout (compared on the same bits). Count the positions equal to
/// the query's (`params.q`, its minima's lowest bits) and keep the document when at least
/// `params.m` agree ([`min_agreements`]). Any other length never matches.
pub(super) const SCRIPT_MINHASH_BITS: &str =
    concat!(count_agreeing_bits!(), "return a >= params.m;");

/// The painless filter of the compact layout with partial copies asked: a near-duplicate as
/// in [`SCRIPT_MINHASH_BITS`], or else the containment half of
/// [`neardup_core::relation::MatchRule::relate`]: the smaller of the query's distinct shingle count
/// (`params.x`) and the document's (`params.d`, doc values) reaches `params.s`, and the
/// smaller one's estimated containment in the larger ([`neardup_core::relation::containment`] of the
/// b-bit estimate `(P − 2^-b) / (1 − 2^-b)`) reaches `params.c`. The rule's evidence margin is
/// left to the client, which judges every document the script keeps, so the script keeps at
/// least what the rule does.
pub(super) const SCRIPT_MINHASH_RELATE: &str = concat!(
    count_agreeing_bits!(),
    "if (a >= params.m) { return true; } \
if (doc[params.d].size() == 0) { return false; } \
double y = doc[params.d].value; double qx = ((Number) params.x).doubleValue(); \
double small = Math.min(qx, y); double large = Math.max(qx, y); \
if (small < 1 || small < ((Number) params.s).doubleValue()) { return false; } \
double chance = Math.pow(2.0, -b); double sim = Math.max(0.0, ((double) a / n - chance) / (1.0 - chance)); \
return sim * (large + small) / ((1.0 + sim) * small) >= ((Number) params.c).doubleValue();"
);

/// How far below the containment threshold [`SCRIPT_MINHASH_RELATE`] keeps a document, so
/// that floating point in painless never drops one the rule keeps.
pub(super) const SCRIPT_CONTAINMENT_SLACK: f64 = 1e-6;
