//! Helpers the engine's integration tests share.

/// Pseudo-random values below `n`.
pub fn draw(len: usize, n: u32, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % u64::from(n)) as u32
        })
        .collect()
}
