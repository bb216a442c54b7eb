//! Length bucketing: group utterances of similar length into batches so padding stays small.
//!
//! A plan is a pure function of `(lengths, config, epoch)`: the training loop can rebuild the
//! exact plan of any epoch and resume at any batch index.
//!
//! 1. indices are shuffled with an RNG seeded by `(seed, epoch)` (so equal lengths tie randomly);
//! 2. they are sorted by length (a stable sort keeps that random order among ties);
//! 3. consecutive indices are cut into batches of at most `max_items` items whose padded size
//!    (`items × longest`) stays within `max_padded_len` — an item longer than that on its own
//!    forms a batch of one;
//! 4. the order of the batches is shuffled with the same RNG.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// How batches are formed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketConfig {
    /// At most this many items per batch.
    pub max_items: usize,
    /// At most this many padded positions (`items × longest length`) per batch.
    pub max_padded_len: usize,
    /// Shuffle ties and batch order (false: sorted, for evaluation).
    pub shuffle: bool,
    /// RNG seed; the epoch number is mixed in.
    pub seed: u64,
}

impl BucketConfig {
    fn validate(&self) -> Result<()> {
        if self.max_items == 0 || self.max_padded_len == 0 {
            return Err(DataError::Config {
                field: "bucketing",
                detail: format!(
                    "max_items ({}) and max_padded_len ({}) must be positive",
                    self.max_items, self.max_padded_len
                ),
            });
        }
        Ok(())
    }
}

/// The batches of one epoch, as lists of dataset indices.
pub fn bucket_batches(
    lengths: &[usize],
    config: &BucketConfig,
    epoch: u64,
) -> Result<Vec<Vec<usize>>> {
    config.validate()?;
    let mut rng = StdRng::seed_from_u64(config.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    if config.shuffle {
        order.shuffle(&mut rng);
    }
    order.sort_by_key(|&i| lengths[i]);

    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        let longest = lengths[i]; // sorted ascending: the newcomer is the longest
        let fits = current.len() < config.max_items
            && (current.len() + 1) * longest <= config.max_padded_len;
        if !fits && !current.is_empty() {
            batches.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    if config.shuffle {
        batches.shuffle(&mut rng);
    }
    Ok(batches)
}

/// Fraction of padded positions that are padding, for a plan.
pub fn padding_fraction(lengths: &[usize], batches: &[Vec<usize>]) -> f64 {
    let (mut real, mut padded) = (0usize, 0usize);
    for b in batches {
        let longest = b.iter().map(|&i| lengths[i]).max().unwrap_or(0);
        real += b.iter().map(|&i| lengths[i]).sum::<usize>();
        padded += longest * b.len();
    }
    if padded == 0 {
        0.0
    } else {
        1.0 - real as f64 / padded as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths() -> Vec<usize> {
        // Deterministic spread of lengths between 20 and 500.
        (0..500u64)
            .map(|i| 20 + ((i * 7919) % 481) as usize)
            .collect()
    }

    fn config() -> BucketConfig {
        BucketConfig {
            max_items: 16,
            max_padded_len: 3000,
            shuffle: true,
            seed: 7,
        }
    }

    #[test]
    fn every_item_once_and_limits_respected() {
        let l = lengths();
        let plan = bucket_batches(&l, &config(), 0).unwrap();
        let mut seen: Vec<usize> = plan.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..l.len()).collect::<Vec<_>>());
        for b in &plan {
            let longest = b.iter().map(|&i| l[i]).max().unwrap();
            assert!(b.len() <= 16);
            assert!(b.len() == 1 || b.len() * longest <= 3000, "{b:?}");
        }
    }

    #[test]
    fn bucketing_pads_far_less_than_random_batches() {
        let l = lengths();
        let plan = bucket_batches(&l, &config(), 0).unwrap();
        let random: Vec<Vec<usize>> = (0..l.len())
            .collect::<Vec<_>>()
            .chunks(8)
            .map(<[usize]>::to_vec)
            .collect();
        let (b, r) = (padding_fraction(&l, &plan), padding_fraction(&l, &random));
        assert!(b < 0.05 && r > 0.3, "bucketed {b}, random {r}");
    }

    #[test]
    fn plans_are_reproducible_per_epoch_and_differ_between_epochs() {
        let l = lengths();
        assert_eq!(
            bucket_batches(&l, &config(), 3).unwrap(),
            bucket_batches(&l, &config(), 3).unwrap()
        );
        assert_ne!(
            bucket_batches(&l, &config(), 3).unwrap(),
            bucket_batches(&l, &config(), 4).unwrap()
        );
    }

    #[test]
    fn oversized_item_gets_its_own_batch_and_bad_config_is_refused() {
        let plan = bucket_batches(&[10, 5000, 12], &config(), 0).unwrap();
        assert!(plan.contains(&vec![1]));
        let bad = BucketConfig {
            max_items: 0,
            ..config()
        };
        assert!(bucket_batches(&[1], &bad, 0).is_err());
    }
}
