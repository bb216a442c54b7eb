//! Training the MTP AR model through the shared loop: the paper's objective (eq. 3), the sum over
//! heads of each head's cross-entropy on the codes `i + 1` steps ahead, with optional per-head
//! weights (Medusa-2 style decay, e.g. `0.8^i`).
//!
//! Targets of one utterance with `L` text tokens and `T` codes (`y = c_0 … c_{T-1}, EOS`):
//!
//! ```text
//! position p:   0 … L-1 | L    L+1  …  L+T-1
//! input:        text    | SEP  c_0  …  c_{T-1}
//! head 0:       —       | y_0  y_1  …  y_T   (= EOS)
//! head i:       —       | y_i  …  y_T  —  (positions whose target would pass EOS carry none)
//! ```

use burn::tensor::activation::log_softmax;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TtsItem, bucket_batches};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use crate::model::{MtpConfig, MtpModel};
use crate::track::FrameTrack;

/// A padded batch ready for the model.
#[derive(Debug, Clone)]
pub struct MtpBatch {
    /// Input ids `[batch, time]`, right-padded.
    pub ids: Tensor<2, Int>,
    /// Phone-track ids `[batch, time, slots]` of an aligned model.
    pub track: Option<Tensor<3, Int>>,
    /// Target class of head `i` at each position, `[heads, batch, time]` (0 where none).
    pub targets: Tensor<3, Int>,
    /// 1 where head `i` has a target at that position, else 0: `[heads, batch, time]`.
    pub weights: Tensor<3>,
    /// Duration targets of an aligned model.
    pub durations: Option<DurationBatch>,
    /// The same audio with another utterance's text (validation only: the text-use diagnostic).
    pub shuffled: Option<Box<MtpBatch>>,
    /// Code targets of head 0 (the tokens a step trains on), for throughput.
    pub tokens: usize,
}

/// The duration predictor's part of a batch.
#[derive(Debug, Clone)]
pub struct DurationBatch {
    /// Text ids `[batch, len]`, right-padded.
    pub ids: Tensor<2, Int>,
    /// True at real phones, `[batch, len]`.
    pub mask: Tensor<2, Bool>,
    /// `ln(1 + frames)` per phone, `[batch, len]` (0 at padding).
    pub target: Tensor<2>,
}

/// One training example: text tokens, stream-0 codes and (aligned models) frames per text token.
#[derive(Debug, Clone, Copy)]
pub struct BatchItem<'a> {
    /// Text token ids.
    pub text: &'a [u32],
    /// Stream-0 codes.
    pub codes: &'a [u32],
    /// Frames per text token, summing to `codes.len()` (required by an aligned model).
    pub durations: Option<&'a [u32]>,
}

/// Host-side pieces of a batch (rows right-padded to the longest sequence).
#[derive(Debug, Clone)]
pub struct HostBatch {
    /// Input ids `[batch, width]`.
    pub ids: Vec<i64>,
    /// Track ids `[batch, width, slots]` (aligned models).
    pub track: Option<Vec<i64>>,
    /// Targets `[heads, batch, width]`.
    pub targets: Vec<i64>,
    /// Target weights `[heads, batch, width]`.
    pub weights: Vec<f32>,
    /// Duration predictor inputs and targets (aligned models).
    pub durations: Option<HostDurations>,
    /// Head-0 targets.
    pub tokens: usize,
    /// `[batch, width]`.
    pub shape: [usize; 2],
}

/// Host-side duration part of a batch: text ids, mask and `ln(1 + frames)` targets, each
/// `[batch, len]`.
#[derive(Debug, Clone)]
pub struct HostDurations {
    /// Text ids.
    pub ids: Vec<i64>,
    /// True at real phones.
    pub mask: Vec<bool>,
    /// `ln(1 + frames)`.
    pub target: Vec<f32>,
    /// Longest text of the batch.
    pub len: usize,
}

/// Builds the ids and per-head targets of `items` for a model of `config`.
///
/// # Errors
/// [`TrainError::Task`] naming the item whose text is empty, whose tokens fall outside the
/// vocabularies, or (aligned models) whose durations are missing or do not add up to its codes.
pub fn host_batch(config: &MtpConfig, items: &[BatchItem<'_>]) -> voxspec_train::Result<HostBatch> {
    let heads = config.n_heads;
    let layout = config.track_layout();
    let width = items
        .iter()
        .map(|i| i.text.len() + 1 + i.codes.len())
        .max()
        .unwrap_or(1);
    let batch = items.len();
    let mut ids = vec![0i64; batch * width];
    let mut targets = vec![0i64; heads * batch * width];
    let mut weights = vec![0f32; heads * batch * width];
    let mut track_rows: Vec<u32> = Vec::new();
    let mut tokens = 0;
    for (b, item) in items.iter().enumerate() {
        let (text, codes) = (item.text, item.codes);
        if text.is_empty() {
            return Err(TrainError::task(format!(
                "item {b} of the batch has no text tokens"
            )));
        }
        if let Some(&t) = text.iter().find(|&&t| t as usize >= config.text_vocab) {
            return Err(TrainError::task(format!(
                "text token {t} is outside the text vocabulary of {}",
                config.text_vocab
            )));
        }
        if let Some(&c) = codes.iter().find(|&&c| c as usize >= config.codebook_size) {
            return Err(TrainError::task(format!(
                "code {c} is outside the codebook of {}",
                config.codebook_size
            )));
        }
        let row = &mut ids[b * width..(b + 1) * width];
        for (slot, &t) in row.iter_mut().zip(text.iter()) {
            *slot = i64::from(t);
        }
        row[text.len()] = i64::from(config.sep_id());
        for (j, &c) in codes.iter().enumerate() {
            row[text.len() + 1 + j] = i64::from(config.code_id(c));
        }
        if let Some(layout) = &layout {
            let track = aligned_track(b, item)?;
            FrameTrack::push_none(text.len(), layout, &mut track_rows);
            // SEP is frame 0, code c_j is frame j + 1; padding continues past the end.
            for f in 0..width - text.len() {
                track.push_ids(f, layout, &mut track_rows);
            }
        }
        // y_j = c_j for j < T, y_T = EOS; head i at position L + j predicts y_{j+i}.
        let t_len = codes.len();
        let y = |j: usize| if j < t_len { codes[j] } else { config.eos() };
        for i in 0..heads {
            for j in 0..=t_len {
                if j + i > t_len {
                    break;
                }
                let at = (i * batch + b) * width + text.len() + j;
                targets[at] = i64::from(y(j + i));
                weights[at] = 1.0;
            }
        }
        tokens += t_len + 1;
    }
    let durations = layout.map(|_| {
        let text_width = items.iter().map(|i| i.text.len()).max().unwrap_or(1);
        let mut d_ids = vec![0i64; batch * text_width];
        let mut mask = vec![false; batch * text_width];
        let mut target = vec![0f32; batch * text_width];
        for (b, item) in items.iter().enumerate() {
            let frames = item.durations.unwrap_or_default();
            for (k, (&t, &d)) in item.text.iter().zip(frames).enumerate() {
                let at = b * text_width + k;
                d_ids[at] = i64::from(t);
                mask[at] = true;
                target[at] = (d as f32).ln_1p();
            }
        }
        HostDurations {
            ids: d_ids,
            mask,
            target,
            len: text_width,
        }
    });
    Ok(HostBatch {
        ids,
        track: layout.map(|_| track_rows.into_iter().map(i64::from).collect()),
        targets,
        weights,
        durations,
        tokens,
        shape: [batch, width],
    })
}

/// The frame track of an aligned item, after checking its durations.
fn aligned_track(b: usize, item: &BatchItem<'_>) -> voxspec_train::Result<FrameTrack> {
    FrameTrack::checked(item.text, item.durations, item.codes.len()).map_err(|detail| {
        TrainError::task(format!(
            "item {b} of the batch {detail}; an aligned model trains on phones with forced \
             alignments (prepare the corpus with TextGrids and use a phoneme tokenizer)"
        ))
    })
}

/// `durations` stretched to add up to `total` frames (the rounding remainder carried along, the
/// last phone absorbing what is left); used to pair a text with another utterance's audio.
pub fn rescale_durations(durations: &[u32], total: usize) -> Vec<u32> {
    let sum: u32 = durations.iter().sum();
    if durations.is_empty() {
        return Vec::new();
    }
    let scale = if sum == 0 {
        0.0
    } else {
        total as f64 / f64::from(sum)
    };
    let mut carry = 0.0f64;
    let mut out: Vec<u32> = durations
        .iter()
        .map(|&d| {
            let want = f64::from(d) * scale + carry;
            let got = want.round().max(0.0);
            carry = want - got;
            got as u32
        })
        .collect();
    let got: usize = out.iter().map(|&d| d as usize).sum();
    if let Some(last) = out.last_mut() {
        *last = (*last as usize + total).saturating_sub(got) as u32;
    }
    out
}

impl MtpBatch {
    /// Uploads a host batch to `device`.
    pub fn from_host(host: HostBatch, heads: usize, device: &Device) -> Self {
        let [batch, width] = host.shape;
        let track = host.track.map(|t| {
            let slots = t.len() / (batch * width).max(1);
            Tensor::from_data(TensorData::new(t, [batch, width, slots]), device)
        });
        let durations = host.durations.map(|d| DurationBatch {
            ids: Tensor::from_data(TensorData::new(d.ids, [batch, d.len]), device),
            mask: Tensor::from_data(TensorData::new(d.mask, [batch, d.len]), device),
            target: Tensor::from_data(TensorData::new(d.target, [batch, d.len]), device),
        });
        MtpBatch {
            ids: Tensor::from_data(TensorData::new(host.ids, [batch, width]), device),
            track,
            targets: Tensor::from_data(
                TensorData::new(host.targets, [heads, batch, width]),
                device,
            ),
            weights: Tensor::from_data(
                TensorData::new(host.weights, [heads, batch, width]),
                device,
            ),
            durations,
            shuffled: None,
            tokens: host.tokens,
        }
    }
}

/// Mean squared error of the predicted `ln(1 + frames)` over real phones.
///
/// # Shapes
/// - `predicted`: `[batch, len]`; `batch.target`, `batch.mask`: `[batch, len]`
/// - output: `[1]`
pub fn duration_loss(predicted: Tensor<2>, batch: &DurationBatch) -> Tensor<1> {
    let mask = batch.mask.clone().float();
    let count = mask.clone().sum().clamp_min(1.0);
    let err = predicted - batch.target.clone();
    (err.clone() * err * mask).sum() / count
}

/// Per-head cross-entropy of a batch: `(sum over heads of weight_i · mean CE_i, [CE_i])`.
///
/// # Shapes
/// - `logits`: `heads` tensors `[batch, time, vocab]`
/// - `batch.targets`, `batch.weights`: `[heads, batch, time]`
/// - output: total `[1]` and one `[1]` per head
pub fn mtp_loss(
    logits: Vec<Tensor<3>>,
    batch: &MtpBatch,
    head_weights: &[f32],
) -> (Tensor<1>, Vec<Tensor<1>>) {
    let [heads, b, t] = batch.weights.dims();
    let mut per_head = Vec::with_capacity(heads);
    let mut total: Option<Tensor<1>> = None;
    for (i, logits) in logits.into_iter().enumerate().take(heads) {
        // [batch, time, vocab] → log-probs of the targets: [batch, time, 1]
        let target = batch.targets.clone().narrow(0, i, 1).reshape([b, t, 1]);
        let weight = batch.weights.clone().narrow(0, i, 1).reshape([b, t]);
        let logp = log_softmax(logits, 2).gather(2, target).reshape([b, t]);
        let count = weight.clone().sum().clamp_min(1.0);
        let ce = (logp * weight).sum().neg() / count;
        let w = head_weights.get(i).copied().unwrap_or(1.0);
        let term = ce.clone() * w;
        total = Some(match total {
            Some(acc) => acc + term,
            None => term,
        });
        per_head.push(ce);
    }
    let total = total.unwrap_or_else(|| Tensor::zeros([1], &batch.weights.device()));
    (total, per_head)
}

/// Settings of an MTP training run beyond the model and the loop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MtpTaskConfig {
    /// Loss weight of head `i` (missing entries are 1).
    pub head_weights: Vec<f32>,
    /// Training batches.
    pub bucket: BucketConfig,
    /// Share of the input codes replaced by random codes in training batches (the targets keep
    /// the true codes): the model learns not to lean on its own last tokens, which at greedy
    /// decoding it would otherwise repeat. 0 (the default) trains on the true history.
    #[serde(default)]
    pub code_noise: f32,
}

/// Text, stream-0 codes and durations of one utterance.
type OwnedItem = (Vec<u32>, Vec<u32>, Option<Vec<u32>>);

/// (text, stream-0 codes, durations) in memory with a deterministic bucketed plan per epoch.
#[derive(Debug, Clone)]
pub struct MtpData {
    items: Vec<OwnedItem>,
    lengths: Vec<usize>,
    config: MtpConfig,
    bucket: BucketConfig,
    shuffled: bool,
    code_noise: f32,
}

impl MtpData {
    /// Keeps stream 0 of each item's codes (and its durations, for aligned models).
    pub fn new(items: &[TtsItem], config: &MtpConfig, bucket: BucketConfig) -> Self {
        let items: Vec<_> = items
            .iter()
            .map(|i| {
                (
                    i.text.clone(),
                    i.codes.stream(0).to_vec(),
                    i.durations.clone(),
                )
            })
            .collect();
        let lengths = items
            .iter()
            .map(|(t, c, _)| t.len() + 1 + c.len())
            .collect();
        Self {
            items,
            lengths,
            config: config.clone(),
            bucket,
            shuffled: false,
            code_noise: 0.0,
        }
    }

    /// Replaces a `share` of the input codes of every batch by uniformly random codes (targets
    /// unchanged), deterministically per (epoch, batch); see [`MtpTaskConfig::code_noise`].
    pub fn with_code_noise(mut self, share: f32) -> Self {
        self.code_noise = share.clamp(0.0, 1.0);
        self
    }

    /// Also builds, for every batch, the same audio paired with the next item's text (and its
    /// durations stretched to the audio): validation then reports `head0_shuffled_text`, the
    /// diagnostic of whether the model uses its text.
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

    fn plan(&self, epoch: usize) -> voxspec_train::Result<Vec<Vec<usize>>> {
        bucket_batches(&self.lengths, &self.bucket, epoch as u64).map_err(TrainError::task)
    }

    /// The text-shuffled batch: item `b` keeps its codes and takes the text of the next item
    /// of the whole set (a derangement, so no item keeps its own text).
    fn shuffled_batch(
        &self,
        indices: &[usize],
        device: &Device,
    ) -> voxspec_train::Result<MtpBatch> {
        let n = self.items.len();
        let stretched: Vec<Option<Vec<u32>>> = indices
            .iter()
            .map(|&i| {
                let other = &self.items[(i + 1) % n];
                other
                    .2
                    .as_ref()
                    .map(|d| rescale_durations(d, self.items[i].1.len()))
            })
            .collect();
        let items: Vec<BatchItem<'_>> = indices
            .iter()
            .zip(&stretched)
            .map(|(&i, d)| BatchItem {
                text: &self.items[(i + 1) % n].0,
                codes: &self.items[i].1,
                durations: d.as_deref(),
            })
            .collect();
        let host = host_batch(&self.config, &items)?;
        Ok(MtpBatch::from_host(host, self.config.n_heads, device))
    }
}

impl BatchSource<MtpBatch> for MtpData {
    fn batches_in_epoch(&self, epoch: usize) -> usize {
        self.plan(epoch).map(|p| p.len()).unwrap_or(0)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<MtpBatch> {
        let plan = self.plan(epoch)?;
        let indices = plan.get(index).ok_or_else(|| {
            TrainError::task(format!("batch {index} of epoch {epoch} does not exist"))
        })?;
        let items: Vec<BatchItem<'_>> = indices
            .iter()
            .map(|&i| BatchItem {
                text: &self.items[i].0,
                codes: &self.items[i].1,
                durations: self.items[i].2.as_deref(),
            })
            .collect();
        let mut host = host_batch(&self.config, &items)?;
        if self.code_noise > 0.0 {
            corrupt_codes(
                &mut host,
                &items,
                &self.config,
                self.code_noise,
                epoch,
                index,
            );
        }
        let mut batch = MtpBatch::from_host(host, self.config.n_heads, device);
        if self.shuffled && self.items.len() > 1 {
            batch.shuffled = Some(Box::new(self.shuffled_batch(indices, device)?));
        }
        Ok(batch)
    }
}

/// Replaces each input code of `host` (not the text, separator or targets) by a uniformly random
/// code with probability `share`, from a SplitMix64 stream seeded by `(epoch, index)`.
fn corrupt_codes(
    host: &mut HostBatch,
    items: &[BatchItem<'_>],
    config: &MtpConfig,
    share: f32,
    epoch: usize,
    index: usize,
) {
    let width = host.shape[1];
    let mut state = (epoch as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index as u64)
        ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let threshold = (f64::from(share) * (u64::MAX as f64)) as u64;
    let codebook = config.codebook_size as u64;
    for (b, item) in items.iter().enumerate() {
        let first = b * width + item.text.len() + 1;
        for slot in &mut host.ids[first..first + item.codes.len()] {
            if next() < threshold {
                *slot = i64::from(config.code_id((next() % codebook) as u32));
            }
        }
    }
}

/// The MTP AR model as a [`TrainTask`].
pub struct MtpTask {
    /// The model to train.
    pub model: MtpConfig,
    /// Loss weights and batching.
    pub task: MtpTaskConfig,
    /// Training pairs.
    pub train: MtpData,
    /// Validation pairs.
    pub valid: Option<MtpData>,
}

impl TrainTask for MtpTask {
    type Model = MtpModel;
    type Batch = MtpBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<MtpModel> {
        self.model.init(device).map_err(TrainError::task)
    }

    fn train_data(&self) -> &dyn BatchSource<MtpBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<MtpBatch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<MtpBatch>)
    }

    fn batch_items(&self, batch: &MtpBatch) -> usize {
        batch.tokens
    }

    fn loss(
        &self,
        model: &MtpModel,
        batch: &MtpBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let logits = model
            .forward(batch.ids.clone(), batch.track.clone())
            .map_err(TrainError::task)?;
        let (mut total, per_head) = mtp_loss(logits, batch, &self.task.head_weights);
        let mut terms: Vec<(String, Tensor<1>)> = per_head
            .into_iter()
            .enumerate()
            .map(|(i, ce)| (format!("head{i}"), ce))
            .collect();
        if let (Some(predictor), Some(d)) = (&model.duration, &batch.durations) {
            let predicted = predictor
                .forward(d.ids.clone(), d.mask.clone())
                .map_err(TrainError::task)?;
            let loss = duration_loss(predicted, d);
            let weight = self
                .model
                .alignment
                .as_ref()
                .map_or(1.0, |a| a.duration_weight);
            total = total + loss.clone() * weight;
            terms.push(("duration".into(), loss));
        }
        if let Some(shuffled) = &batch.shuffled {
            let logits = model
                .forward(shuffled.ids.clone(), shuffled.track.clone())
                .map_err(TrainError::task)?;
            let (_, ce) = mtp_loss(logits, shuffled, &[1.0]);
            if let Some(head0) = ce.into_iter().next() {
                terms.push(("head0_shuffled_text".into(), head0));
            }
        }
        Ok(Losses { total, terms })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "mtp",
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
            "task": serde_json::to_value(&self.task).unwrap_or(serde_json::Value::Null),
        })
    }
}
