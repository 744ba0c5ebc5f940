//! Fixed-size numbers from bytes read from files, without indexing: a short
//! slice gives `None` (or is left out), never a panic.

/// The first `N` bytes of `s`, or `None` when it has fewer.
pub fn array<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    s.first_chunk::<N>().copied()
}

/// The whole `N`-byte groups of `s` in order (a shorter tail is left out).
pub fn groups<const N: usize>(s: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    s.chunks_exact(N).filter_map(array::<N>)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_groups_never_read_past_the_end() {
        assert_eq!(array::<2>(&[1, 2, 3]), Some([1, 2]));
        assert_eq!(array::<4>(&[1, 2, 3]), None);
        let g: Vec<[u8; 2]> = groups::<2>(&[1, 2, 3, 4, 5]).collect();
        assert_eq!(g, vec![[1, 2], [3, 4]]);
        assert_eq!(groups::<8>(&[0; 7]).count(), 0);
    }
}
