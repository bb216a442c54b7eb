//! Training the multi-stream LM through the shared loop: per-stream cross-entropy on the valid
//! positions of the delay pattern (and each stream's EOS), averaged over streams; nothing on
//! the text or voice positions, nor on positions holding the special token.
//!
//! Targets of one utterance (`L` text tokens, `T` frames, delayed layout `D = [K][1+T+max_delay]`):
//!
//! ```text
//! position:  voice | text_0 … text_{L-1} | step 0 … step s … step T+max_delay
//! input:     g     | text                | D[·][s]
//! head j:    —     | —                   | D[j][s+1] where valid; EOS where s+1 = 1+T+delay_j;
//!                                          else no target (S positions, weight 0)
//! ```

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use burn::module::Module;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, Codes, DelayPattern, TtsItem, bucket_batches};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use voxspec_mtp::{DurationBatch, duration_loss, rescale_durations};

use crate::mtp::shift_targets;

use crate::align::{MsAlignConfig, StepTrack};
use crate::error::{MultiStreamError, Result};
use crate::input::{MsInput, SeqRow};
use crate::model::{MultiStreamConfig, MultiStreamModel};

/// One training utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct MsItem {
    /// Utterance id.
    pub id: String,
    /// Text token ids.
    pub text: Vec<u32>,
    /// Codec codes `[n_q, T]` (the first `streams` are used).
    pub codes: Codes,
    /// The global (voice) vector, required when the model has a `global_dim`.
    pub global: Option<Vec<f32>>,
    /// Duration of each text token in track units (`units_per_frame` per frame), adding up
    /// to `frames · units_per_frame` give or take one frame; required by an aligned model.
    pub durations: Option<Vec<u32>>,
}

impl MsItem {
    /// Items from (text, codes) pairs (`voxspec_data::TtsDataset`: manifest, tokenizer and
    /// token store joined by id), each with the global vector `globals[id]` if given.
    pub fn from_tts(items: &[TtsItem], globals: Option<&HashMap<String, Vec<f32>>>) -> Vec<Self> {
        items
            .iter()
            .map(|i| MsItem {
                id: i.id.clone(),
                text: i.text.clone(),
                codes: i.codes.clone(),
                global: globals.and_then(|g| g.get(&i.id).cloned()),
                durations: None,
            })
            .collect()
    }
}

/// A batch ready for the model.
#[derive(Debug, Clone)]
pub struct MsBatch {
    /// Inputs, `[batch, time]` positions.
    pub input: MsInput,
    /// Target class of each head `[batch, time, streams]` (0 where none).
    pub targets: Tensor<3, Int>,
    /// 1 where a head has a target `[batch, time, streams]`, else 0.
    pub weights: Tensor<3>,
    /// Targets and weights of the extra heads `1..n` (models with `mtp`), each
    /// `[batch, time, streams]`: head 0's shifted `i` steps ([`crate::mtp::shift_targets`]).
    pub ahead: Vec<(Tensor<3, Int>, Tensor<3>)>,
    /// Duration targets (aligned models).
    pub durations: Option<DurationBatch>,
    /// The same audio with another utterance's text and alignment (validation only: the
    /// text-use diagnostic).
    pub shuffled: Option<Box<MsBatch>>,
    /// Scored speech steps (positions with at least one target), for throughput.
    pub steps: usize,
}

/// The delayed layout `[K][1 + T + max_delay]` of an item's first `K` streams.
///
/// # Errors
/// [`MultiStreamError::InvalidInput`] when the item has fewer streams than the pattern or a
/// code is outside the codebook; as [`DelayPattern::build`].
pub fn delayed_codes(
    config: &MultiStreamConfig,
    pattern: &DelayPattern,
    item: &MsItem,
) -> Result<Vec<Vec<u32>>> {
    let k = pattern.streams();
    if item.codes.n_q < k {
        return Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {}: {} code streams, the model reads {k}",
                item.id, item.codes.n_q
            ),
        });
    }
    let streams: Vec<Vec<u32>> = (0..k).map(|j| item.codes.stream(j).to_vec()).collect();
    if let Some(&c) = streams
        .iter()
        .flatten()
        .find(|&&c| c as usize >= config.codebook_size)
    {
        return Err(MultiStreamError::TokenOutOfRange {
            what: "code",
            token: c,
            vocab: config.codebook_size,
        });
    }
    Ok(pattern.build(&streams)?)
}

/// Checks an item against `config` on the host and returns its delayed layout.
///
/// # Errors
/// As [`build_batch`].
fn check_item(
    config: &MultiStreamConfig,
    pattern: &DelayPattern,
    item: &MsItem,
) -> Result<Vec<Vec<u32>>> {
    if item.text.is_empty() {
        return Err(MultiStreamError::InvalidInput {
            detail: format!("utterance {} has no text tokens", item.id),
        });
    }
    if let Some(&t) = item.text.iter().find(|&&t| t as usize >= config.text_vocab) {
        return Err(MultiStreamError::TokenOutOfRange {
            what: "text",
            token: t,
            vocab: config.text_vocab,
        });
    }
    match (&item.global, config.global_dim) {
        (None, g) if g > 0 => Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {} has no global vector; the model has global_dim {g}",
                item.id
            ),
        }),
        (Some(_), 0) => Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {} has a global vector; the model has no global_dim",
                item.id
            ),
        }),
        (Some(v), g) if v.len() != g => Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {}: global vector of {} values, global_dim {g}",
                item.id,
                v.len()
            ),
        }),
        _ => {
            if let Some(a) = &config.align {
                check_durations(a, item)?;
            }
            delayed_codes(config, pattern, item)
        }
    }
}

/// Checks an aligned item's durations: one per text token, adding up to its frames (within
/// one frame: the last frame of an utterance is padded).
fn check_durations(align: &MsAlignConfig, item: &MsItem) -> Result<()> {
    let Some(d) = &item.durations else {
        return Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {} has no durations; an aligned model trains on phones with their \
                 durations",
                item.id
            ),
        });
    };
    if d.len() != item.text.len() {
        return Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {}: {} durations for {} text tokens",
                item.id,
                d.len(),
                item.text.len()
            ),
        });
    }
    let units: usize = d.iter().map(|&u| u as usize).sum();
    let frames = units.div_ceil(align.units_per_frame);
    if frames != item.codes.n_frames {
        return Err(MultiStreamError::InvalidInput {
            detail: format!(
                "utterance {}: durations of {units} units make {frames} frames of {} units, the \
                 codes have {}",
                item.id, align.units_per_frame, item.codes.n_frames
            ),
        });
    }
    Ok(())
}

/// The step-track ids of an item's `steps` speech steps (empty for an unaligned model).
fn item_track(config: &MultiStreamConfig, item: &MsItem, steps: usize) -> Vec<u32> {
    match (&config.align, &item.durations) {
        (Some(a), Some(d)) => {
            StepTrack::new(&item.text, d, a).steps(0, steps, config.text_vocab, a)
        }
        _ => Vec::new(),
    }
}

/// Builds the inputs and targets of `items` on `device`.
///
/// # Errors
/// [`MultiStreamError::InvalidInput`] for an item without text, without the voice vector the
/// model needs (or with one it does not take), or with too few streams; as [`MsInput::build`].
pub fn build_batch(
    config: &MultiStreamConfig,
    items: &[&MsItem],
    device: &Device,
) -> Result<MsBatch> {
    build_batch_with(config, items, None, device)
}

/// [`build_batch`] with input codes dropped: each code of the *input* (never of the targets)
/// becomes the special token `S` with probability `drop.0`, drawn from a generator seeded
/// with `drop.1`.
///
/// # Errors
/// As [`build_batch`].
pub fn build_batch_with(
    config: &MultiStreamConfig,
    items: &[&MsItem],
    drop: Option<(f32, u64)>,
    device: &Device,
) -> Result<MsBatch> {
    let pattern = config.pattern()?;
    let k = config.streams;
    let delayed = items
        .iter()
        .map(|item| check_item(config, &pattern, item))
        .collect::<Result<Vec<_>>>()?;
    let inputs: Vec<Vec<Vec<u32>>> = match drop {
        Some((p, seed)) if p > 0.0 => {
            let mut rng = StdRng::seed_from_u64(seed);
            let special = config.special();
            delayed
                .iter()
                .map(|d| {
                    d.iter()
                        .map(|row| {
                            row.iter()
                                .map(|&c| {
                                    if c != special && rng.random::<f32>() < p {
                                        special
                                    } else {
                                        c
                                    }
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect()
        }
        _ => delayed.clone(),
    };
    let tracks: Vec<Vec<u32>> = items
        .iter()
        .zip(&delayed)
        .map(|(item, d)| item_track(config, item, d.first().map_or(0, Vec::len)))
        .collect();
    let rows: Vec<SeqRow<'_>> = items
        .iter()
        .zip(&inputs)
        .zip(&tracks)
        .map(|((item, d), track)| SeqRow {
            voice: item.global.as_deref(),
            text: &item.text,
            steps: d,
            track,
        })
        .collect();
    let input = MsInput::build(config, &rows, device)?;
    let [batch, time] = input.dims();
    let mut targets = vec![0i64; batch * time * k];
    let mut weights = vec![0f32; batch * time * k];
    let mut steps = 0;
    for (b, (item, d)) in items.iter().zip(&delayed).enumerate() {
        let first = config.voice_positions() + item.text.len();
        let frames = item.codes.n_frames;
        let n = pattern.steps(frames);
        for s in 0..n {
            let mut any = false;
            for (j, row) in d.iter().enumerate() {
                let next = s + 1;
                let target = if pattern.is_valid(j, next, frames) {
                    row[next]
                } else if next == pattern.step_of(j, frames) {
                    config.eos()
                } else {
                    continue;
                };
                // [batch, time, streams]
                let at = ((b * time) + first + s) * k + j;
                targets[at] = i64::from(target);
                weights[at] = 1.0;
                any = true;
            }
            steps += usize::from(any);
        }
    }
    let scored: Vec<bool> = weights.chunks_exact(k).map(|w| w.contains(&1.0)).collect();
    let ahead = (1..config.n_heads())
        .map(|i| {
            let (t, w) = shift_targets(&targets, &weights, &scored, [batch, time, k], i);
            (
                Tensor::from_data(TensorData::new(t, [batch, time, k]), device),
                Tensor::from_data(TensorData::new(w, [batch, time, k]), device),
            )
        })
        .collect();
    Ok(MsBatch {
        input,
        ahead,
        targets: Tensor::from_data(TensorData::new(targets, [batch, time, k]), device),
        weights: Tensor::from_data(TensorData::new(weights, [batch, time, k]), device),
        durations: config.align.as_ref().map(|_| duration_batch(items, device)),
        shuffled: None,
        steps,
    })
}

/// The duration predictor's inputs and `ln(1 + units)` targets.
fn duration_batch(items: &[&MsItem], device: &Device) -> DurationBatch {
    let batch = items.len();
    let width = items.iter().map(|i| i.text.len()).max().unwrap_or(1);
    let mut ids = vec![0i64; batch * width];
    let mut mask = vec![false; batch * width];
    let mut target = vec![0f32; batch * width];
    for (b, item) in items.iter().enumerate() {
        let units = item.durations.as_deref().unwrap_or_default();
        for (k, (&t, &u)) in item.text.iter().zip(units).enumerate() {
            let at = b * width + k;
            ids[at] = i64::from(t);
            mask[at] = true;
            target[at] = (u as f32).ln_1p();
        }
    }
    DurationBatch {
        ids: Tensor::from_data(TensorData::new(ids, [batch, width]), device),
        mask: Tensor::from_data(TensorData::new(mask, [batch, width]), device),
        target: Tensor::from_data(TensorData::new(target, [batch, width]), device),
    }
}

/// Item `b` with the text (and alignment, stretched to its length) of `other`.
fn with_text_of(config: &MultiStreamConfig, item: &MsItem, other: &MsItem) -> MsItem {
    let durations = match (&config.align, &other.durations) {
        (Some(a), Some(d)) => {
            let units = item.codes.n_frames * a.units_per_frame;
            Some(rescale_durations(d, units))
        }
        _ => None,
    };
    MsItem {
        id: item.id.clone(),
        text: other.text.clone(),
        codes: item.codes.clone(),
        global: item.global.clone(),
        durations,
    }
}

/// Per-stream cross-entropy over the positions with a target, and its mean over streams.
///
/// # Shapes
/// - `logits`: `[batch, time, streams, vocab]`
/// - `targets`, `weights`: `[batch, time, streams]`
/// - output: the mean `[1]` and one `[1]` per stream
pub fn multistream_loss(
    logits: Tensor<4>,
    targets: Tensor<3, Int>,
    weights: Tensor<3>,
) -> (Tensor<1>, Vec<Tensor<1>>) {
    let [b, t, k] = weights.dims();
    // [batch, time, streams, 1] → [batch, time, streams]
    let logp = log_softmax(logits, 3)
        .gather(3, targets.reshape([b, t, k, 1]))
        .reshape([b, t, k]);
    let nll = logp.neg() * weights.clone();
    let per_stream: Vec<Tensor<1>> = (0..k)
        .map(|j| {
            let count = weights.clone().narrow(2, j, 1).sum().clamp_min(1.0);
            nll.clone().narrow(2, j, 1).sum() / count
        })
        .collect();
    let total = per_stream
        .iter()
        .cloned()
        .reduce(|a, b| a + b)
        .map_or_else(|| Tensor::zeros([1], &weights.device()), |s| s / k as f32);
    (total, per_stream)
}

/// Settings of a training run beyond the model and the loop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MultiStreamTaskConfig {
    /// Training batches (lengths are whole sequences: voice, text and delayed steps).
    pub bucket: BucketConfig,
}

/// Utterances in memory with a deterministic (seeded) bucketed batch plan per epoch.
#[derive(Debug, Clone)]
pub struct MultiStreamData {
    items: Vec<MsItem>,
    lengths: Vec<usize>,
    config: MultiStreamConfig,
    bucket: BucketConfig,
    shuffled: bool,
    code_dropout: f32,
}

impl MultiStreamData {
    /// Checks every item against `config` once (text, streams, codes, voice vector, length).
    ///
    /// # Errors
    /// As [`build_batch`] for the first bad item; [`MultiStreamError::InvalidInput`] for no
    /// items or a sequence longer than the transformer's `max_seq_len`.
    pub fn new(
        items: Vec<MsItem>,
        config: &MultiStreamConfig,
        bucket: BucketConfig,
    ) -> Result<Self> {
        if items.is_empty() {
            return Err(MultiStreamError::InvalidInput {
                detail: "no training utterances".into(),
            });
        }
        let pattern = config.pattern()?;
        let mut lengths = Vec::with_capacity(items.len());
        for item in &items {
            let len =
                config.voice_positions() + item.text.len() + pattern.steps(item.codes.n_frames);
            if len > config.transformer.max_seq_len {
                return Err(MultiStreamError::InvalidInput {
                    detail: format!(
                        "utterance {}: {len} positions exceed max_seq_len {}",
                        item.id, config.transformer.max_seq_len
                    ),
                });
            }
            lengths.push(len);
        }
        for item in &items {
            check_item(config, &pattern, item)?;
        }
        Ok(Self {
            items,
            lengths,
            config: config.clone(),
            bucket,
            shuffled: false,
            code_dropout: 0.0,
        })
    }

    /// Drops input codes to `S` with probability `p` (training only: the targets keep them), so
    /// the model leans on the text and the step track rather than on memorised code
    /// sequences.
    pub fn with_code_dropout(mut self, p: f32) -> Self {
        self.code_dropout = p;
        self
    }

    /// Adds to every batch the same audio with the next item's text and alignment (stretched
    /// to the audio): validation then reports `streams_shuffled_text` beside `streams` (the mean over streams), the check that the model
    /// uses its text.
    pub fn with_shuffled_text(mut self) -> Self {
        self.shuffled = true;
        self
    }

    /// Number of utterances.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items.
    pub fn items(&self) -> &[MsItem] {
        &self.items
    }

    /// The batches of `epoch` as item indices.
    ///
    /// # Errors
    /// [`TrainError::Task`] for a bad bucketing config.
    pub fn plan(&self, epoch: usize) -> voxspec_train::Result<Vec<Vec<usize>>> {
        bucket_batches(&self.lengths, &self.bucket, epoch as u64).map_err(TrainError::task)
    }
}

impl BatchSource<MsBatch> for MultiStreamData {
    fn batches_in_epoch(&self, epoch: usize) -> usize {
        self.plan(epoch).map(|p| p.len()).unwrap_or(0)
    }

    fn batch(&self, epoch: usize, index: usize, device: &Device) -> voxspec_train::Result<MsBatch> {
        let plan = self.plan(epoch)?;
        let indices = plan.get(index).ok_or_else(|| {
            TrainError::task(format!("batch {index} of epoch {epoch} does not exist"))
        })?;
        let items: Vec<&MsItem> = indices.iter().map(|&i| &self.items[i]).collect();
        let seed = self.bucket.seed ^ ((epoch as u64) << 32) ^ index as u64;
        let drop = (self.code_dropout > 0.0).then_some((self.code_dropout, seed));
        let mut batch =
            build_batch_with(&self.config, &items, drop, device).map_err(TrainError::task)?;
        if self.shuffled && self.items.len() > 1 {
            // Item i takes the text of the item after it in the corpus (never its own).
            let swapped: Vec<MsItem> = indices
                .iter()
                .map(|&i| {
                    let other = &self.items[(i + 1) % self.items.len()];
                    with_text_of(&self.config, &self.items[i], other)
                })
                .collect();
            let refs: Vec<&MsItem> = swapped.iter().collect();
            let shuffled = build_batch(&self.config, &refs, device).map_err(TrainError::task)?;
            batch.shuffled = Some(Box::new(shuffled));
        }
        Ok(batch)
    }
}

/// The multi-stream LM as a [`TrainTask`]; logs `loss` (the mean over streams) and
/// `stream{j}` (each stream's cross-entropy).
pub struct MultiStreamTask {
    /// The model to train.
    pub model: MultiStreamConfig,
    /// Batching.
    pub task: MultiStreamTaskConfig,
    /// Training utterances.
    pub train: MultiStreamData,
    /// Validation utterances.
    pub valid: Option<MultiStreamData>,
    /// Starting weights (a draft cut from a target's layers); `None`: fresh ones.
    pub init: Option<MultiStreamModel>,
}

impl TrainTask for MultiStreamTask {
    type Model = MultiStreamModel;
    type Batch = MsBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<MultiStreamModel> {
        match &self.init {
            // Loaded weights may not require gradients; the loop's freeze list decides.
            Some(model) => Ok(model.clone().to_device(device).set_require_grad(true)),
            None => self.model.init(device).map_err(TrainError::task),
        }
    }

    fn train_data(&self) -> &dyn BatchSource<MsBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<MsBatch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<MsBatch>)
    }

    fn batch_items(&self, batch: &MsBatch) -> usize {
        batch.steps
    }

    fn loss(
        &self,
        model: &MultiStreamModel,
        batch: &MsBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let hidden = model.hidden(&batch.input).map_err(TrainError::task)?;
        let (mut total, per_stream) = multistream_loss(
            model.logits(hidden.clone()),
            batch.targets.clone(),
            batch.weights.clone(),
        );
        let mut terms: Vec<(String, Tensor<1>)> = per_stream
            .into_iter()
            .enumerate()
            .map(|(j, ce)| (format!("stream{j}"), ce))
            .collect();
        terms.push(("streams".into(), total.clone()));
        if let Some(mtp) = &self.model.mtp {
            for (i, (logits, (targets, weights))) in model
                .ahead_logits(hidden)
                .into_iter()
                .zip(&batch.ahead)
                .enumerate()
            {
                let (mean, _) = multistream_loss(logits, targets.clone(), weights.clone());
                total = total + mean.clone() * mtp.head_weight(i + 1);
                terms.push((format!("ahead{}", i + 1), mean));
            }
        }
        if let (Some(predictor), Some(d)) = (&model.duration, &batch.durations) {
            let predicted = predictor
                .forward(d.ids.clone(), d.mask.clone())
                .map_err(TrainError::task)?;
            let loss = duration_loss(predicted, d);
            let weight = self.model.align.as_ref().map_or(1.0, |a| a.duration_weight);
            total = total + loss.clone() * weight;
            terms.push(("duration".into(), loss));
        }
        if let Some(shuffled) = &batch.shuffled {
            let logits = model.forward(&shuffled.input).map_err(TrainError::task)?;
            let (mean, _) =
                multistream_loss(logits, shuffled.targets.clone(), shuffled.weights.clone());
            terms.push(("streams_shuffled_text".into(), mean));
        }
        Ok(Losses { total, terms })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "multistream",
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
            "task": serde_json::to_value(&self.task).unwrap_or(serde_json::Value::Null),
        })
    }
}
