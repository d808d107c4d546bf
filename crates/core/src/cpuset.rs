//! A fixed-size set of CPUs (up to [`CpuSet::MAX_CPUS`]), `Copy` and allocation-free, used for affinity
//! masks and scheduling-domain spans.

use crate::CpuId;

/// A set of CPU ids below [`CpuSet::MAX_CPUS`], stored as a bitmap.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuSet {
    bits: [u64; 16],
}

impl CpuSet {
    /// The largest machine schedlab models, in logical CPUs.
    pub const MAX_CPUS: usize = 1024;

    /// The empty set.
    pub const fn empty() -> Self {
        CpuSet { bits: [0; 16] }
    }

    /// CPUs `0..n`.
    pub fn first_n(n: usize) -> Self {
        assert!(n <= Self::MAX_CPUS, "CpuSet holds at most {} CPUs", Self::MAX_CPUS);
        let mut s = Self::empty();
        for i in 0..n {
            s.bits[i / 64] |= 1 << (i % 64);
        }
        s
    }

    /// A set holding just `cpu`.
    pub fn single(cpu: CpuId) -> Self {
        let mut s = Self::empty();
        s.insert(cpu);
        s
    }

    /// Adds `cpu`.
    #[inline]
    pub fn insert(&mut self, cpu: CpuId) {
        let i = cpu.idx();
        self.bits[i / 64] |= 1 << (i % 64);
    }

    /// Removes `cpu`.
    #[inline]
    pub fn remove(&mut self, cpu: CpuId) {
        let i = cpu.idx();
        self.bits[i / 64] &= !(1 << (i % 64));
    }

    /// Whether `cpu` is in the set.
    #[inline]
    pub fn contains(&self, cpu: CpuId) -> bool {
        let i = cpu.idx();
        i < Self::MAX_CPUS && self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Number of CPUs in the set.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// The intersection of two sets.
    pub fn and(&self, other: &CpuSet) -> CpuSet {
        let mut s = *self;
        for (a, b) in s.bits.iter_mut().zip(other.bits.iter()) {
            *a &= *b;
        }
        s
    }

    /// Whether the two sets share a CPU (`cpumask_intersects`), without building the intersection.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.bits.iter().zip(other.bits.iter()).any(|(a, b)| a & b != 0)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.bits.iter().zip(other.bits.iter()).all(|(a, b)| a & !b == 0)
    }

    /// The lowest CPU in the set.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some(CpuId((w * 64) as u32 + b))
            })
        })
    }
}

impl Default for CpuSet {
    fn default() -> Self {
        Self::empty()
    }
}

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(|c| c.0)).finish()
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        let mut s = CpuSet::empty();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let a: CpuSet = [0, 3, 64, 1023].into_iter().map(CpuId).collect();
        assert_eq!(a.count(), 4);
        assert!(a.contains(CpuId(64)) && !a.contains(CpuId(65)));
        assert_eq!(a.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 3, 64, 1023]);
        let b = CpuSet::first_n(4);
        assert_eq!(a.and(&b).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 3]);
        assert!(a.and(&b).is_subset(&b));
        assert!(!a.is_subset(&b));
        assert!(a.intersects(&b) && !a.intersects(&CpuSet::single(CpuId(1))));
        assert_eq!(CpuSet::empty().first(), None);
    }
}
