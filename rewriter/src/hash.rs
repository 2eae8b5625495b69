//! A fast hasher for the rewriter's per-site maps (names, targets), whose keys are short byte
//! strings and small integers from the object being rewritten: the standard library's SipHash
//! resists collisions an adversary picks, which costs about 15% of the rewriting and protects
//! nothing here (a crafted object can only slow its own link). The multiply-and-rotate mix of
//! rustc's `FxHasher`, finished with MurmurHash3's finalizer.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A `HashSet` with [`FxHasher`].
pub type FxHashSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

/// rustc's `FxHasher`: one rotate, xor and multiply per word.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(word(c));
        }
        // The rest without copying it out (a copy of a length the compiler does not know is a
        // call of `memcpy`, which cost more than the hash): the last eight bytes, overlapping
        // the words before; a shorter key as two overlapping halves, or byte by byte.
        let rest = chunks.remainder();
        match (bytes.len(), rest.len()) {
            (_, 0) => {}
            (n, _) if n >= 8 => self.add(word(&bytes[n - 8..])),
            (n, _) if n >= 4 => {
                let half = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes")));
                self.add(half(&bytes[..4]) | half(&bytes[n - 4..]) << 32);
            }
            _ => self.add(rest.iter().fold(0u64, |w, &b| w << 8 | u64::from(b))),
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// The hash with its bits mixed both ways (MurmurHash3's finalizer): a multiply carries
    /// each input bit only upwards, so keys that differ only in the high bytes of their last
    /// word (names ending in different digits) would otherwise share the low bits the table
    /// indexes by, and fall into one long probe chain.
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_maps_work() {
        let mut map: FxHashMap<&[u8], usize> = FxHashMap::default();
        for (i, name) in [&b"main"[..], b"f", b"a_longer_function_name", b""]
            .iter()
            .enumerate()
        {
            map.insert(name, i);
        }
        assert_eq!(map.get(&b"a_longer_function_name"[..]), Some(&2));
        assert_eq!(map.get(&b""[..]), Some(&3));
        assert_eq!(map.get(&b"mai"[..]), None);
    }

    /// Names that differ only in their last characters (a generated program's probes) must
    /// spread over a table's buckets, which take the hash's low bits: without the final mix all
    /// of them shared their low bits, and a set of a few thousand probe names cost more than
    /// sorting them.
    #[test]
    fn names_differing_in_their_last_digits_spread_over_the_low_bits() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<FxHasher>::default();
        let buckets: HashSet<u64> = (0..1000)
            .map(|i| {
                let name = format!("__dtrace_isenabled_gen__p{i:04}");
                build.hash_one(name.as_bytes()) & 1023
            })
            .collect();
        // 1000 random keys fill about 640 of 1024 buckets.
        assert!(buckets.len() > 550, "{} buckets of 1024", buckets.len());
    }
}
