//! Property tests of the delay pattern: `revert(build(x)) == x` for random shapes, delays and
//! stream counts, and the layout's invariants.

use proptest::prelude::*;
use voxspec_data::{DelayPattern, UNGENERATED};

/// Streams, frames, a delay step `d` and codes below `card` (the special token).
fn case() -> impl Strategy<Value = (usize, usize, usize, u32, Vec<u32>)> {
    (1usize..8, 0usize..40, 0usize..4, 2u32..2000).prop_flat_map(|(k, t, d, card)| {
        (
            Just(k),
            Just(t),
            Just(d),
            Just(card),
            proptest::collection::vec(0..card, k * t),
        )
    })
}

proptest! {
    #[test]
    fn revert_inverts_build((k, t, d, card, flat) in case()) {
        let pattern = DelayPattern::uniform(k, d, card).unwrap();
        let codes: Vec<Vec<u32>> = (0..k).map(|j| flat[j * t..(j + 1) * t].to_vec()).collect();
        let delayed = pattern.build(&codes).unwrap();
        prop_assert_eq!(delayed.len(), k);
        let steps = 1 + t + d * (k - 1);
        for row in &delayed {
            prop_assert_eq!(row.len(), steps);
        }
        // Exactly K·T valid positions, each holding its frame; every other one holds S.
        let mut valid = 0;
        for (j, row) in delayed.iter().enumerate() {
            prop_assert_eq!(row[0], card, "the empty first step");
            for (s, &v) in row.iter().enumerate() {
                match pattern.frame_at(j, s, t) {
                    Some(f) => {
                        valid += 1;
                        prop_assert_eq!(v, codes[j][f]);
                        prop_assert_eq!(pattern.step_of(j, f), s);
                    }
                    None => prop_assert_eq!(v, card),
                }
            }
        }
        prop_assert_eq!(valid, k * t);
        prop_assert_eq!(pattern.revert(&delayed).unwrap(), codes);
    }

    #[test]
    fn an_ungenerated_valid_position_is_refused((k, t, d, card, flat) in case(), pick in 0usize..1000) {
        prop_assume!(t > 0);
        let pattern = DelayPattern::uniform(k, d, card).unwrap();
        let codes: Vec<Vec<u32>> = (0..k).map(|j| flat[j * t..(j + 1) * t].to_vec()).collect();
        let mut delayed = pattern.build(&codes).unwrap();
        let (j, f) = (pick % k, pick % t);
        delayed[j][pattern.step_of(j, f)] = UNGENERATED;
        prop_assert!(pattern.revert(&delayed).is_err());
    }
}

#[test]
fn no_delay_is_the_plain_layout_after_the_empty_step() {
    let pattern = DelayPattern::uniform(3, 0, 7).unwrap();
    let codes = vec![vec![1, 2], vec![3, 4], vec![5, 6]];
    let delayed = pattern.build(&codes).unwrap();
    assert_eq!(delayed, vec![vec![7, 1, 2], vec![7, 3, 4], vec![7, 5, 6]]);
    assert_eq!(pattern.revert(&delayed).unwrap(), codes);
}
