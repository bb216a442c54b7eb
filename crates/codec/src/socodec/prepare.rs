//! The training data of a SoCodec before batching, and its token extraction.
//!
//! Training reads every utterance's raw teacher features (a `voxspec teacher extract` store)
//! and the log-mel of its audio ([`load_raw_split`]); a new run standardises both with the
//! training split's statistics ([`with_statistics`], kept in the config) and
//! [`standardised`] turns them into the [`SoCodecUtterance`]s [`super::SoCodecData`] batches.
//! [`extract_split`] encodes a split into a token store, on several phase-shifted token grids
//! for augmentation (`voxspec_data::phase_shift`); [`extract_store`] does so for one split of a
//! prepared corpus, from its feature store into its token store.

use std::collections::HashSet;
use std::path::Path;

use burn::tensor::Device;
use rayon::prelude::*;
use voxspec_data::phase_shift::shifted_id;
use voxspec_data::{Codes, Progress, TokenStoreMeta, TokenStoreWriter, Utterance};
use voxspec_teacher::FeatureStoreReader;

use super::{SoCodec, SoCodecConfig, SoCodecUtterance, column_stats};
use crate::error::CodecError;

/// One utterance's teacher features `[frames, feature_dim]` and the log-mel of its audio
/// `[mel frames, n_mels]`, both row-major and not standardised.
#[derive(Debug, Clone, PartialEq)]
pub struct RawUtterance {
    /// Teacher features, `[frames, feature_dim]`.
    pub features: Vec<f32>,
    /// Log-mel, `[mel frames, n_mels]`.
    pub log_mel: Vec<f32>,
}

/// Raw features `[frames, dim]` of utterance `id` from `store`, and `dim`.
///
/// # Errors
/// [`CodecError::MissingFeatures`] when the store has none for `id`; the store's errors.
pub fn store_features(
    store: &FeatureStoreReader,
    id: &str,
) -> Result<(Vec<f32>, usize), CodecError> {
    let f = store
        .get(id)?
        .ok_or_else(|| CodecError::MissingFeatures { id: id.to_string() })?;
    Ok((f.data, f.dim))
}

/// The raw features (from `store`) and log-mel (of the audio, read at the codec's mel rate)
/// of every utterance, in parallel, in the order of `utterances`.
///
/// # Errors
/// [`CodecError::MissingFeatures`], [`CodecError::FeatureDim`] (features of another
/// dimension than `config.feature_dim`) or [`CodecError::Audio`], naming the utterance.
pub fn load_raw_split(
    utterances: &[Utterance],
    config: &SoCodecConfig,
    store: &FeatureStoreReader,
    progress: &dyn Progress,
    what: &str,
) -> Result<Vec<RawUtterance>, CodecError> {
    let front = config.log_mel()?;
    progress.start(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let (features, dim) = store_features(store, &u.id)?;
            if dim != config.feature_dim {
                return Err(CodecError::FeatureDim {
                    id: u.id.clone(),
                    found: dim,
                    expected: config.feature_dim,
                });
            }
            let audio = voxspec_audio::load_resampled(Path::new(&u.path), config.mel.sample_rate)
                .map_err(|source| CodecError::Audio {
                id: u.id.clone(),
                source,
            })?;
            progress.inc(1);
            Ok(RawUtterance {
                features,
                log_mel: front.compute(&audio.samples),
            })
        })
        .collect::<Result<Vec<_>, _>>();
    progress.finish();
    out
}

/// `config` with the per-column mean and standard deviation of the features and log-mels of
/// `raw` (the training split), which the codec standardises its inputs and targets with.
pub fn with_statistics(config: SoCodecConfig, raw: &[RawUtterance]) -> SoCodecConfig {
    let (mean, std) = column_stats(
        raw.iter().map(|u| u.features.as_slice()),
        config.feature_dim,
    );
    let (mel_mean, mel_std) =
        column_stats(raw.iter().map(|u| u.log_mel.as_slice()), config.mel.n_mels);
    config
        .with_feature_mean(mean)
        .with_feature_std(std)
        .with_mel_mean(mel_mean)
        .with_mel_std(mel_std)
}

/// `raw` standardised with `config`'s statistics: the training utterances.
pub fn standardised(config: &SoCodecConfig, raw: Vec<RawUtterance>) -> Vec<SoCodecUtterance> {
    raw.into_iter()
        .map(
            |RawUtterance {
                 mut features,
                 mut log_mel,
             }| {
                config.normalize(&mut features);
                config.normalize_mel(&mut log_mel);
                SoCodecUtterance { features, log_mel }
            },
        )
        .collect()
}

/// The token-store ids of utterance `id` on `grids` token grids, with each grid's shift in
/// teacher frames: `(0, id)`, then `(s, <id>@<s · feature_ms>ms)` for s = 1..grids.
pub fn grid_ids(id: &str, grids: usize, feature_ms: usize) -> Vec<(usize, String)> {
    (0..grids)
        .map(|s| match s {
            0 => (0, id.to_string()),
            s => (
                s,
                shifted_id(id, u32::try_from(s * feature_ms).unwrap_or(u32::MAX)),
            ),
        })
        .collect()
}

/// Encodes the teacher features (from `store`) of every utterance of `utterances` into
/// `writer`, the first `n_q` streams, on `grids` token grids ([`grid_ids`]: grid `s` drops the
/// first `s` teacher frames; an utterance shorter than a shift has no encoding on that grid).
/// Ids in `done` are skipped. Returns the encodings written.
///
/// # Errors
/// [`CodecError::MissingFeatures`] and the codec's and the store's errors.
#[allow(clippy::too_many_arguments)]
pub fn extract_split(
    codec: &SoCodec,
    config: &SoCodecConfig,
    store: &FeatureStoreReader,
    utterances: &[Utterance],
    (n_q, grids): (usize, usize),
    done: &HashSet<String>,
    writer: &mut TokenStoreWriter,
    progress: &dyn Progress,
    device: &Device,
) -> Result<usize, CodecError> {
    let mut written = 0usize;
    for u in utterances {
        let ids: Vec<(usize, String)> = grid_ids(&u.id, grids, config.feature_ms)
            .into_iter()
            .filter(|(_, id)| !done.contains(id))
            .collect();
        if ids.is_empty() {
            progress.inc(1);
            continue;
        }
        let (f, dim) = store_features(store, &u.id)?;
        for (s, id) in ids {
            let Some(shifted) = f.get(s * dim..).filter(|x| !x.is_empty()) else {
                continue; // shorter than the shift
            };
            let mut tokens = codec
                .encode_features(config, shifted, device)
                .map_err(|e| e.of(&id))?;
            tokens.truncate(n_q);
            let frames = tokens[0].len();
            writer.push(&id, Codes::new(n_q, frames, tokens.concat())?)?;
            written += 1;
        }
        progress.inc(1);
    }
    Ok(written)
}

/// The metadata of a token store of the first `n_q` streams of the codec of `config`.
///
/// # Errors
/// [`CodecError::InvalidConfig`] when a stream's vocabulary does not fit 32 bits.
pub fn token_store_meta(config: &SoCodecConfig, n_q: usize) -> Result<TokenStoreMeta, CodecError> {
    let vocab = config.stream_vocab();
    Ok(TokenStoreMeta {
        n_q,
        codebook_size: u32::try_from(vocab).map_err(|_| CodecError::InvalidConfig {
            field: "sub_codebook_size",
            reason: format!("a stream vocabulary of {vocab} does not fit 32 bits"),
        })?,
        frame_rate: 1000.0 / config.frame_ms as f32,
    })
}

/// What encoding one split into a token store did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractedSplit {
    /// Encodings written now.
    pub written: usize,
    /// Encodings the store already held.
    pub already: usize,
}

/// Encodes the split `split` (its manifest's `utterances`) from the teacher feature store in
/// `features` into the token store in `out` ([`extract_split`], new shards after
/// `shard_frames` frames), the first `n_q` streams; the training split on `phase_shifts`
/// token grids, dev and test on the one grid they are scored on. Encodings already in the
/// store are kept. `progress` counts the utterances, named `split`.
///
/// # Errors
/// [`CodecError::FeatureStore`], and those of [`extract_split`] and the token store.
#[allow(clippy::too_many_arguments)]
pub fn extract_store(
    codec: &SoCodec,
    config: &SoCodecConfig,
    (features, out): (&Path, &Path),
    (split, utterances): (&str, &[Utterance]),
    (n_q, phase_shifts, shard_frames): (usize, usize, usize),
    progress: &dyn Progress,
    device: &Device,
) -> Result<ExtractedSplit, CodecError> {
    let meta = token_store_meta(config, n_q)?;
    let store = super::run::open_feature_store(features, split)?;
    let done = voxspec_data::token_store::stored_ids(out, split, meta)?;
    let mut writer = TokenStoreWriter::new(out, split, meta, shard_frames)?;
    progress.start(utterances.len() as u64, split);
    let grids = if split == "train" { phase_shifts } else { 1 };
    let written = extract_split(
        codec,
        config,
        &store,
        utterances,
        (n_q, grids),
        &done,
        &mut writer,
        progress,
        device,
    )?;
    writer.finish()?;
    progress.finish();
    Ok(ExtractedSplit {
        written,
        already: done.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_store_holds_a_streams_vocabulary_at_the_token_rate() {
        let config = SoCodecConfig::tiny().with_frame_ms(120);
        let meta = token_store_meta(&config, 3).unwrap();
        assert_eq!((meta.n_q, meta.codebook_size), (3, 256));
        assert!((meta.frame_rate - 1000.0 / 120.0).abs() < 1e-6);
    }

    #[test]
    fn grids_after_the_first_are_named_by_their_shift() {
        assert_eq!(grid_ids("u", 1, 20), vec![(0, "u".to_string())]);
        assert_eq!(
            grid_ids("u", 3, 20),
            vec![
                (0, "u".to_string()),
                (1, "u@20ms".to_string()),
                (2, "u@40ms".to_string())
            ]
        );
    }
}
