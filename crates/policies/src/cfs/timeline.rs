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

#[inline]
fn less(ses: &[Se], heap: &[SeId], i: usize, j: usize) -> bool {
    before(&ses[heap[i] as usize], &ses[heap[j] as usize])
}

fn swap(heap: &mut [SeId], ses: &mut [Se], i: usize, j: usize) {
    heap.swap(i, j);
    ses[heap[i] as usize].pos = i as u32;
    ses[heap[j] as usize].pos = j as u32;
}

fn sift_up(heap: &mut [SeId], ses: &mut [Se], mut i: usize) {
    while i > 0 {
        let p = (i - 1) / 2;
        if !less(ses, heap, i, p) {
            break;
        }
        swap(heap, ses, i, p);
        i = p;
    }
}

fn sift_down(heap: &mut [SeId], ses: &mut [Se], mut i: usize) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < heap.len() && less(ses, heap, l, m) {
            m = l;
        }
        if r < heap.len() && less(ses, heap, r, m) {
            m = r;
        }
        if m == i {
            break;
        }
        swap(heap, ses, i, m);
        i = m;
    }
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
    let last = heap.len() - 1;
    if i != last {
        swap(heap, ses, i, last);
    }
    heap.pop();
    ses[id as usize].pos = NO_POS;
    if i < heap.len() {
        sift_down(heap, ses, i);
        sift_up(heap, ses, i);
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
