//! One sort for code that every program carries (the runtime, linked into each executable and
//! shared object): takes a number of items and a comparison of two of them by index; hands on the
//! order that sorts them, stably. The sort is not generic, so it is in the runtime once however
//! many kinds of things the runtime sorts (each instantiation of `core`'s `sort_by` is several
//! kilobytes of code); the comparison is a call through a pointer, a few nanoseconds each, on
//! paths that run once (a table being registered, a trace written, a report printed).

extern crate alloc;
use alloc::vec::Vec;

/// Items sorted by insertion before the merging starts: short runs, where insertion is fastest.
const RUN: usize = 16;

/// The indices `0..n` in the order that sorts their items by `less` (`less(a, b)`: item `a` goes
/// before item `b`); items of which neither goes before the other keep their order (the sort is
/// stable). A bottom-up merge sort: at most about `n log2 n` comparisons, and `n` fewer still
/// for items already in order.
pub fn sorted_order(n: usize, less: &mut dyn FnMut(usize, usize) -> bool) -> Vec<usize> {
    let mut from: Vec<usize> = (0..n).collect();
    for run in from.chunks_mut(RUN) {
        insertion_sort(run, less);
    }
    let mut to = from.clone();
    let mut width = RUN;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            merge(
                &from[start..mid],
                &from[mid..end],
                &mut to[start..end],
                less,
            );
            start = end;
        }
        core::mem::swap(&mut from, &mut to);
        width *= 2;
    }
    from
}

/// Sorts `run` (indices) by `less`, stably, by insertion.
fn insertion_sort(run: &mut [usize], less: &mut dyn FnMut(usize, usize) -> bool) {
    for i in 1..run.len() {
        let item = run[i];
        let mut j = i;
        while j > 0 && less(item, run[j - 1]) {
            run[j] = run[j - 1];
            j -= 1;
        }
        run[j] = item;
    }
}

/// Merges the sorted runs `left` and `right` (left's items first among equals) into `out`.
fn merge(
    left: &[usize],
    right: &[usize],
    out: &mut [usize],
    less: &mut dyn FnMut(usize, usize) -> bool,
) {
    // Runs already in order (the common case of sorted input) are copied whole.
    if left.is_empty() || right.is_empty() || !less(right[0], left[left.len() - 1]) {
        out[..left.len()].copy_from_slice(left);
        out[left.len()..].copy_from_slice(right);
        return;
    }
    let (mut l, mut r) = (0, 0);
    for slot in out.iter_mut() {
        let take_right = l == left.len() || (r < right.len() && less(right[r], left[l]));
        if take_right {
            *slot = right[r];
            r += 1;
        } else {
            *slot = left[l];
            l += 1;
        }
    }
}

/// Sorts `items` stably by `less` ([`sorted_order`], then the items moved into that order in
/// place: the generic part is this short function).
pub fn sort_by<T>(items: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let mut order = sorted_order(items.len(), &mut |a, b| less(&items[a], &items[b]));
    permute(items, &mut order);
}

/// Sorts `items` stably by the key `key` gives each.
pub fn sort_by_key<T, K: Ord>(items: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(items, |a, b| key(a) < key(b));
}

/// Puts `items` in `order` (`items[i]` becomes the item that was at `order[i]`) by following the
/// permutation's cycles, one swap per item moved; `order` is left as the identity.
fn permute<T>(items: &mut [T], order: &mut [usize]) {
    for start in 0..order.len() {
        let mut at = start;
        while order[at] != at {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A pseudo-random sequence (xorshift), the same every run.
    fn sequence(n: usize, modulo: u64) -> Vec<u64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % modulo
            })
            .collect()
    }

    #[test]
    fn sorts_as_the_standard_stable_sort_does_at_every_length_around_the_run_and_merge_sizes() {
        for n in [0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 257, 1000, 4099] {
            // Few distinct keys: many equal items, whose order only a stable sort keeps.
            let keys = sequence(n, 7);
            let mut items: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
            let mut expected = items.clone();
            expected.sort_by_key(|&(k, _)| k);
            sort_by_key(&mut items, |&(k, _)| k);
            assert_eq!(items, expected, "n = {n}");
        }
    }

    #[test]
    fn sorted_and_reversed_input_and_a_descending_comparison() {
        let mut up: Vec<u32> = (0..1000).collect();
        sort_by(&mut up, |a, b| a < b);
        assert_eq!(up, (0..1000).collect::<Vec<_>>());
        sort_by(&mut up, |a, b| a > b);
        assert_eq!(up, (0..1000).rev().collect::<Vec<_>>());
        let order = sorted_order(4, &mut |a, b| [3, 1, 2, 1][a] < [3, 1, 2, 1][b]);
        assert_eq!(order, vec![1, 3, 2, 0]);
    }
}
