//! The timeline: CFS keeps runnable entities in a red-black tree ordered by vruntime and always takes
//! the leftmost. Here an indexed binary min-heap gives the same answers (leftmost in O(1), insert and
//! arbitrary removal in O(log n)) with no allocation per operation: each entity stores its heap
//! position. Ties keep the kernel's order: `__enqueue_entity` sends an entity with an equal key to the
//! right, so among equal vruntimes the one inserted first is leftmost; the heap breaks ties by an
//! insertion sequence number. Keys compare wrap-safely as `(s64)(a - b) < 0` (`entity_before`).

use super::fair::{Se, SeId, NO_POS};

/// `entity_before(a, b)` with the kernel's tie order.
#[inline]
pub fn before(a: &Se, b: &Se) -> bool {
    let d = a.vruntime.wrapping_sub(b.vruntime) as i64;
    d < 0 || (d == 0 && a.tree_seq < b.tree_seq)
}

/// Moves the entity at `i` up to its place, shifting the later parents down into the hole (each
/// entity moved once, its position written once). Keys are unique (`tree_seq` breaks ties), so this
/// makes exactly the moves of a swap-by-swap sift.
fn sift_up(heap: &mut [SeId], ses: &mut [Se], mut i: usize) {
    let id = heap[i];
    while i > 0 {
        let p = (i - 1) / 2;
        let parent = heap[p];
        if !before(&ses[id as usize], &ses[parent as usize]) {
            break;
        }
        heap[i] = parent;
        ses[parent as usize].pos = i as u32;
        i = p;
    }
    heap[i] = id;
    ses[id as usize].pos = i as u32;
}

/// Moves the entity at `i` down to its place, shifting the earlier child up into the hole at each
/// level (the same moves as a swap-by-swap sift, see [`sift_up`]).
fn sift_down(heap: &mut [SeId], ses: &mut [Se], mut i: usize) {
    let id = heap[i];
    let n = heap.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            break;
        }
        let r = l + 1;
        let c = if r < n && before(&ses[heap[r] as usize], &ses[heap[l] as usize]) { r } else { l };
        let child = heap[c];
        if !before(&ses[child as usize], &ses[id as usize]) {
            break;
        }
        heap[i] = child;
        ses[child as usize].pos = i as u32;
        i = c;
    }
    heap[i] = id;
    ses[id as usize].pos = i as u32;
}

/// `__enqueue_entity`: inserts `id` (its `tree_seq` must be set by the caller).
pub fn insert(heap: &mut Vec<SeId>, ses: &mut [Se], id: SeId) {
    debug_assert_eq!(ses[id as usize].pos, NO_POS, "entity already in a timeline");
    heap.push(id);
    let i = heap.len() - 1;
    ses[id as usize].pos = i as u32;
    sift_up(heap, ses, i);
}

/// `__dequeue_entity`: removes `id` from the timeline it is in.
pub fn remove(heap: &mut Vec<SeId>, ses: &mut [Se], id: SeId) {
    let i = ses[id as usize].pos as usize;
    debug_assert!(i < heap.len() && heap[i] == id, "entity not in this timeline");
    let last = heap.pop().expect("entity in this timeline");
    ses[id as usize].pos = NO_POS;
    if i < heap.len() {
        // The last entity fills the hole and moves whichever way its key says.
        heap[i] = last;
        let up = i > 0 && before(&ses[last as usize], &ses[heap[(i - 1) / 2] as usize]);
        if up {
            sift_up(heap, ses, i);
        } else {
            sift_down(heap, ses, i);
        }
    }
}

/// `__pick_first_entity`: the leftmost entity.
#[inline]
pub fn first(heap: &[SeId]) -> Option<SeId> {
    heap.first().copied()
}

/// `__pick_last_entity`: the rightmost entity (O(n); used only by SCHED_BATCH yield).
pub fn last(heap: &[SeId], ses: &[Se]) -> Option<SeId> {
    heap.iter().copied().reduce(|a, b| if before(&ses[a as usize], &ses[b as usize]) { b } else { a })
}

/// The `k` leftmost entities, in order (the first `k` of an in-order walk of the kernel's tree): a
/// frontier walk of the heap from its root, O(k^2) for the small `k` AVEC uses.
pub fn leftmost(heap: &[SeId], ses: &[Se], k: usize, out: &mut Vec<SeId>) {
    out.clear();
    let mut frontier: Vec<usize> = Vec::with_capacity(2 * k + 1);
    if !heap.is_empty() {
        frontier.push(0);
    }
    while out.len() < k && !frontier.is_empty() {
        let (fi, &hi) = frontier
            .iter()
            .enumerate()
            .min_by(|a, b| {
                if before(&ses[heap[*a.1] as usize], &ses[heap[*b.1] as usize]) {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                }
            })
            .expect("non-empty frontier");
        frontier.swap_remove(fi);
        out.push(heap[hi]);
        for c in [2 * hi + 1, 2 * hi + 2] {
            if c < heap.len() {
                frontier.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a sorted list under random inserts and removals (with many equal vruntimes and keys
    /// across the wrap-around): the leftmost and the `k` leftmost are the list's first, in order,
    /// and every entity's stored position points at it.
    #[test]
    fn order_matches_a_sorted_list_with_the_kernel_tie_break() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut ses: Vec<Se> = (0..64).map(|_| Se::new(0)).collect();
        let mut heap: Vec<SeId> = Vec::new();
        // Reference: (vruntime relative to a base near the wrap, insertion sequence, id).
        let base = u64::MAX - 50;
        let mut reference: Vec<(i64, u64, SeId)> = Vec::new();
        let mut seq = 0;
        let mut out = Vec::new();
        for _ in 0..20_000 {
            let queued = reference.len();
            if queued == 0 || (queued < 64 && next(3) > 0) {
                let free: Vec<SeId> = (0..64).filter(|&i| ses[i as usize].pos == NO_POS).collect();
                let id = free[next(free.len() as u64) as usize];
                let rel = next(100) as i64 - 40;
                seq += 1;
                let s = &mut ses[id as usize];
                s.vruntime = base.wrapping_add(rel as u64);
                s.tree_seq = seq;
                insert(&mut heap, &mut ses, id);
                reference.push((rel, seq, id));
            } else {
                let k = next(queued as u64) as usize;
                let (_, _, id) = reference.remove(k);
                remove(&mut heap, &mut ses, id);
            }
            reference.sort();
            assert_eq!(first(&heap), reference.first().map(|r| r.2));
            for (i, &id) in heap.iter().enumerate() {
                assert_eq!(ses[id as usize].pos as usize, i);
            }
            let k = next(6) as usize;
            leftmost(&heap, &ses, k, &mut out);
            let want: Vec<SeId> = reference.iter().take(k).map(|r| r.2).collect();
            assert_eq!(out, want);
        }
    }
}
