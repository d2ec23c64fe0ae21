//! Little-endian primitive encoding into a byte vector (the `Buf.Write` half
//! of the OCaml reference, janestreet/memtrace), mirroring [`crate::read`]'s
//! `buf` module, whose docs give the vint table. A vint takes the first form
//! that holds the value, so 2^31 to 2^32 − 1 need the 9-byte form: the 5-byte
//! form is signed.

#[inline(always)]
pub(crate) fn put_u8(b: &mut Vec<u8>, v: u8) {
    b.push(v);
}

#[inline(always)]
pub(crate) fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}

#[inline(always)]
pub(crate) fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

#[inline(always)]
pub(crate) fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_f64(b: &mut Vec<u8>, v: f64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// A string up to its first NUL, then a NUL.
pub(crate) fn put_string(b: &mut Vec<u8>, s: &[u8]) {
    let len = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    b.extend_from_slice(&s[..len]);
    b.push(0);
}

/// A vint of an OCaml integer: the first form that fits of one byte (0–252),
/// tag 253 + u16, tag 254 + i32, tag 255 + i64.
#[inline(always)]
pub(crate) fn put_vint(b: &mut Vec<u8>, v: i64) {
    if (0..=252).contains(&v) {
        b.push(v as u8);
    } else if v & 0xffff == v {
        b.push(253);
        put_u16(b, v as u16);
    } else if i64::from(v as i32) == v {
        b.push(254);
        put_u32(b, v as i32 as u32);
    } else {
        b.push(255);
        put_i64(b, v);
    }
}

pub(crate) fn patch_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn patch_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn patch_i64(b: &mut [u8], at: usize, v: i64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read::buf::Cursor;

    #[test]
    fn vint_round_trips_at_every_width() {
        let values = [
            0,
            252,
            253,
            65535,
            65536,
            -1,
            i64::from(i32::MAX),
            1 << 31,
            (1 << 32) - 1,
            1 << 40,
            -(1 << 40),
            (1 << 62) - 1,
            -(1 << 62),
        ];
        let mut b = Vec::new();
        for &v in &values {
            put_vint(&mut b, v);
        }
        let mut c = Cursor::new(&b);
        for &v in &values {
            assert_eq!(c.vint().unwrap(), v);
        }
        assert_eq!(c.remaining(), 0);
        let mut b = Vec::new();
        put_vint(&mut b, 1 << 31);
        assert_eq!(b[0], 255, "2^31 needs the 64-bit form: tag 254 is signed");
    }
}
