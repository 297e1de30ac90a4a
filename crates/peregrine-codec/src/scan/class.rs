//! Byte classes: a 256-entry table for the scalar path and the nibble tables derived from it
//! at compile time for the vector paths; the four classes the parser scans for.

use crate::grammar::{field_value_byte, reg_name, target_plain, tchar};

/// A set of bytes, usable by every scanning path.
#[derive(Debug)]
pub(crate) struct Class {
    table: [bool; 256],
    pub(super) lo: [u8; 16],
    pub(super) hi: [u8; 16],
    /// `lo` and `hi` twice each (one copy per 128-bit lane, as `vpshufb` looks up within each
    /// lane), aligned so that the AVX2 path can read them with one aligned load.
    pub(super) lo2: Lanes,
    pub(super) hi2: Lanes,
}

/// Two copies of a 16-byte nibble table, 32-byte aligned.
#[derive(Debug)]
#[repr(C, align(32))]
pub(super) struct Lanes(pub(super) [u8; 32]);

const fn twice(t: [u8; 16]) -> Lanes {
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = t[i % 16];
        i += 1;
    }
    Lanes(out)
}

impl Class {
    /// Builds the nibble tables from a membership table. Panics (at compile time, since every
    /// class is a `const`) if the set needs more than 8 distinct rows, which none of ours does.
    const fn new(table: [bool; 256]) -> Class {
        let mut rows = [0u16; 16];
        let mut h = 0;
        while h < 16 {
            let mut l = 0;
            while l < 16 {
                if table[h * 16 + l] {
                    rows[h] |= 1 << l;
                }
                l += 1;
            }
            h += 1;
        }
        // Assign one bit per distinct non-empty row.
        let mut distinct = [0u16; 8];
        let mut n = 0;
        let mut hi = [0u8; 16];
        let mut h = 0;
        while h < 16 {
            if rows[h] != 0 {
                let mut k = 0;
                while k < n && distinct[k] != rows[h] {
                    k += 1;
                }
                if k == n {
                    assert!(n < 8, "byte class needs more than 8 distinct rows");
                    distinct[n] = rows[h];
                    n += 1;
                }
                hi[h] = 1 << k;
            }
            h += 1;
        }
        let mut lo = [0u8; 16];
        let mut l = 0;
        while l < 16 {
            let mut k = 0;
            while k < n {
                if distinct[k] & (1 << l) != 0 {
                    lo[l] |= 1 << k;
                }
                k += 1;
            }
            l += 1;
        }
        Class {
            table,
            lo,
            hi,
            lo2: twice(lo),
            hi2: twice(hi),
        }
    }

    /// Scalar membership test.
    #[inline(always)]
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.table[b as usize]
    }

    /// Membership computed the way the vector paths compute it (for the consistency test).
    #[cfg(test)]
    fn contains_nibble(&self, b: u8) -> bool {
        self.lo[(b & 0xF) as usize] & self.hi[(b >> 4) as usize] != 0
    }
}

/// The membership table of one of the grammar's classes (`const fn` pointers cannot be called
/// in a constant, hence the index).
const fn table_of(kind: u8) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match kind {
            0 => tchar(b),
            1 => field_value_byte(b),
            2 => target_plain(b),
            _ => reg_name(b),
        };
        i += 1;
    }
    t
}

/// Method and field-name bytes.
pub(crate) static TCHAR: Class = Class::new(table_of(0));
/// Field-value bytes.
pub(crate) static VALUE: Class = Class::new(table_of(1));
/// Plain request-target bytes.
pub(crate) static TARGET: Class = Class::new(table_of(2));
/// Host (reg-name) bytes.
pub(crate) static HOST: Class = Class::new(table_of(3));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibble_tables_match_scalar_tables_for_all_bytes() {
        for class in [&TCHAR, &VALUE, &TARGET, &HOST] {
            for b in 0..=255u8 {
                assert_eq!(class.contains(b), class.contains_nibble(b), "byte {b:#04x}");
            }
        }
    }
}
