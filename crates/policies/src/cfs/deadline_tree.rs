//! EEVDF's augmented timeline: the queued entities in timeline order (vruntime, then insertion order,
//! as [`super::timeline::before`]), each subtree knowing its entity with the earliest virtual deadline.
//!
//! Linux 6.6 keeps `min_deadline` in every node of the rbtree and `__pick_eevdf` descends it in
//! O(log n): eligibility (`v_i <= V`) holds for a prefix of the timeline, so at an eligible node the
//! node and its whole left subtree are eligible (their best is known from the augmentation) and the
//! walk goes right; at an ineligible node it goes left. This module gives the same walk over a treap
//! (a binary search tree balanced by pseudo-random priorities, O(log n) expected depth) kept beside
//! the vruntime heap that CFS's leftmost pick uses; its nodes live in one array indexed by entity, so
//! nothing is allocated per operation.
//!
//! Ties: among equal deadlines the leftmost entity wins (the kernel's walk returns whichever its
//! tree's shape reaches first, which a different balanced tree cannot reproduce; leftmost is the
//! shape-independent rule, documented in docs/policies/eevdf.md). Priorities come from a hash of the
//! entity's insertion sequence number, so the shape, and the examined counts, are deterministic.

use super::fair::{Se, SeId};
use super::timeline::before;

/// No node.
pub const NIL: u32 = u32::MAX;

/// One entity's node.
#[derive(Clone, Copy, Debug)]
struct Node {
    left: u32,
    right: u32,
    prio: u64,
    /// The entity of this subtree with the earliest deadline (leftmost among equals).
    best: u32,
}

impl Default for Node {
    fn default() -> Self {
        Self { left: NIL, right: NIL, prio: 0, best: NIL }
    }
}

/// Earlier virtual deadline, wrap-safe (`deadline_gt` the other way round).
#[inline]
fn deadline_before(a: &Se, b: &Se) -> bool {
    (a.deadline.wrapping_sub(b.deadline) as i64) < 0
}

/// Of two entities (either may be [`NIL`]), the one with the earlier deadline, the one earlier in
/// the timeline among equal deadlines.
#[inline]
fn better(ses: &[Se], a: u32, b: u32) -> u32 {
    if a == NIL {
        return b;
    }
    if b == NIL {
        return a;
    }
    let (sa, sb) = (&ses[a as usize], &ses[b as usize]);
    if deadline_before(sa, sb) || (sa.deadline == sb.deadline && before(sa, sb)) {
        a
    } else {
        b
    }
}

/// splitmix64: the priority of a node from its entity's insertion sequence number.
fn prio_of(seq: u64) -> u64 {
    let mut z = seq.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The nodes of all runqueues' trees (each entity is in at most one); a runqueue holds its root.
#[derive(Clone, Debug, Default)]
pub struct DeadlineTree {
    nodes: Vec<Node>,
}

impl DeadlineTree {
    #[inline]
    fn best(&self, n: u32) -> u32 {
        if n == NIL {
            NIL
        } else {
            self.nodes[n as usize].best
        }
    }

    fn pull(&mut self, ses: &[Se], n: u32) {
        let Node { left, right, .. } = self.nodes[n as usize];
        let b = better(ses, better(ses, self.best(left), n), self.best(right));
        self.nodes[n as usize].best = b;
    }

    /// Splits `t` into the entities before `key` and the rest.
    fn split(&mut self, ses: &[Se], t: u32, key: &Se) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if before(&ses[t as usize], key) {
            let (l, r) = self.split(ses, self.nodes[t as usize].right, key);
            self.nodes[t as usize].right = l;
            self.pull(ses, t);
            (t, r)
        } else {
            let (l, r) = self.split(ses, self.nodes[t as usize].left, key);
            self.nodes[t as usize].left = r;
            self.pull(ses, t);
            (l, t)
        }
    }

    /// Joins `a` and `b`, every entity of `a` before every entity of `b`.
    fn merge(&mut self, ses: &[Se], a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio >= self.nodes[b as usize].prio {
            let r = self.merge(ses, self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.pull(ses, a);
            a
        } else {
            let l = self.merge(ses, a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.pull(ses, b);
            b
        }
    }

    /// Inserts `se` (its vruntime, `tree_seq` and deadline set) into the tree rooted at `root`;
    /// returns the new root.
    pub fn insert(&mut self, ses: &[Se], root: u32, se: SeId) -> u32 {
        if se as usize >= self.nodes.len() {
            self.nodes.resize(se as usize + 1, Node::default());
        }
        self.nodes[se as usize] =
            Node { left: NIL, right: NIL, prio: prio_of(ses[se as usize].tree_seq), best: se };
        let (l, r) = self.split(ses, root, &ses[se as usize]);
        let l = self.merge(ses, l, se);
        self.merge(ses, l, r)
    }

    /// Removes `se` from the tree rooted at `root`; returns the new root.
    pub fn remove(&mut self, ses: &[Se], root: u32, se: SeId) -> u32 {
        assert!(root != NIL, "entity not in this deadline tree");
        if root == se {
            let Node { left, right, .. } = self.nodes[se as usize];
            return self.merge(ses, left, right);
        }
        if before(&ses[se as usize], &ses[root as usize]) {
            let l = self.remove(ses, self.nodes[root as usize].left, se);
            self.nodes[root as usize].left = l;
        } else {
            let r = self.remove(ses, self.nodes[root as usize].right, se);
            self.nodes[root as usize].right = r;
        }
        self.pull(ses, root);
        root
    }

    /// `__pick_eevdf`'s walk: the entity with the earliest deadline among those for which
    /// `eligible` holds (a prefix of the timeline), leftmost among equals, or [`NIL`]. Returns it
    /// with the number of nodes visited.
    pub fn pick(&self, ses: &[Se], root: u32, eligible: impl Fn(&Se) -> bool) -> (u32, u64) {
        let (mut best, mut node, mut visited) = (NIL, root, 0);
        while node != NIL {
            visited += 1;
            let n = &self.nodes[node as usize];
            if eligible(&ses[node as usize]) {
                // This node and its left subtree are eligible and lie after everything chosen from
                // so far, so `best` keeps ties.
                best = better(ses, best, better(ses, self.best(n.left), node));
                node = n.right;
            } else {
                node = n.left;
            }
        }
        (best, visited)
    }

    /// The depth of the tree rooted at `root` (tests).
    #[cfg(test)]
    pub fn depth(&self, root: u32) -> usize {
        if root == NIL {
            0
        } else {
            let n = self.nodes[root as usize];
            1 + self.depth(n.left).max(self.depth(n.right))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn se(vruntime: u64, deadline: u64, tree_seq: u64) -> Se {
        let mut s = Se::new(0);
        s.vruntime = vruntime;
        s.deadline = deadline;
        s.tree_seq = tree_seq;
        s
    }

    /// Against a plain scan over random entities, thresholds and removals, with many equal
    /// deadlines and vruntimes, and near the wrap of the u64 clock.
    #[test]
    fn pick_matches_a_scan_and_stays_shallow() {
        let mut x = 88172645463325252u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let base = u64::MAX - 5_000; // vruntimes wrap past zero
        let mut ses = Vec::new();
        let mut tree = DeadlineTree::default();
        let mut root = NIL;
        let mut queued: Vec<SeId> = Vec::new();
        for seq in 1..=4_000u64 {
            if !queued.is_empty() && rnd(3) == 0 {
                let i = rnd(queued.len() as u64) as usize;
                let id = queued.swap_remove(i);
                root = tree.remove(&ses, root, id);
            } else {
                let v = base.wrapping_add(rnd(10_000));
                ses.push(se(v, v.wrapping_add(rnd(50) * 100), seq));
                let id = (ses.len() - 1) as SeId;
                root = tree.insert(&ses, root, id);
                queued.push(id);
            }
            let threshold = base.wrapping_add(rnd(11_000));
            let eligible = |s: &Se| (s.vruntime.wrapping_sub(threshold) as i64) <= 0;
            let mut want = NIL;
            for &id in &queued {
                if eligible(&ses[id as usize]) {
                    want = better(&ses, want, id);
                }
            }
            let (got, visited) = tree.pick(&ses, root, eligible);
            assert_eq!(got, want, "step {seq}");
            assert!(visited as usize <= tree.depth(root));
        }
        assert!(queued.len() > 1000);
        // A treap of n nodes is about 3 log2 n deep at worst in practice.
        let log2 = (queued.len() as f64).log2();
        assert!((tree.depth(root) as f64) < 4.0 * log2, "depth {} for {}", tree.depth(root), queued.len());
    }
}
