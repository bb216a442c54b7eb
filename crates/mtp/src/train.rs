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
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TtsItem, bucket_batches};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use crate::model::{MtpConfig, MtpModel};

/// A padded batch ready for the model.
#[derive(Debug, Clone)]
pub struct MtpBatch {
    /// Input ids `[batch, time]`, right-padded.
    pub ids: Tensor<2, Int>,
    /// Target class of head `i` at each position, `[heads, batch, time]` (0 where none).
    pub targets: Tensor<3, Int>,
    /// 1 where head `i` has a target at that position, else 0: `[heads, batch, time]`.
    pub weights: Tensor<3>,
    /// Code targets of head 0 (the tokens a step trains on), for throughput.
    pub tokens: usize,
}

/// Host-side pieces of a batch: `(ids, targets, weights, head-0 targets)`; rows are right-padded
/// to the longest sequence.
pub type HostBatch = (Vec<i64>, Vec<i64>, Vec<f32>, usize, [usize; 2]);

/// Builds the ids and per-head targets of `items` (text, stream-0 codes) for a model of `config`.
///
/// # Errors
/// [`TrainError::Task`] naming the item whose text is empty or whose tokens fall outside the
/// vocabularies.
pub fn host_batch(
    config: &MtpConfig,
    items: &[(&[u32], &[u32])],
) -> voxspec_train::Result<HostBatch> {
    let heads = config.n_heads;
    let width = items
        .iter()
        .map(|(t, c)| t.len() + 1 + c.len())
        .max()
        .unwrap_or(1);
    let batch = items.len();
    let mut ids = vec![0i64; batch * width];
    let mut targets = vec![0i64; heads * batch * width];
    let mut weights = vec![0f32; heads * batch * width];
    let mut tokens = 0;
    for (b, (text, codes)) in items.iter().enumerate() {
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
    Ok((ids, targets, weights, tokens, [batch, width]))
}

impl MtpBatch {
    /// Uploads a host batch to `device`.
    pub fn from_host(host: HostBatch, heads: usize, device: &Device) -> Self {
        let (ids, targets, weights, tokens, [batch, width]) = host;
        MtpBatch {
            ids: Tensor::from_data(TensorData::new(ids, [batch, width]), device),
            targets: Tensor::from_data(TensorData::new(targets, [heads, batch, width]), device),
            weights: Tensor::from_data(TensorData::new(weights, [heads, batch, width]), device),
            tokens,
        }
    }
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
}

/// (text, stream-0 codes) pairs in memory with a deterministic bucketed plan per epoch.
#[derive(Debug, Clone)]
pub struct MtpData {
    items: Vec<(Vec<u32>, Vec<u32>)>,
    lengths: Vec<usize>,
    config: MtpConfig,
    bucket: BucketConfig,
}

impl MtpData {
    /// Keeps stream 0 of each item's codes.
    pub fn new(items: &[TtsItem], config: &MtpConfig, bucket: BucketConfig) -> Self {
        let items: Vec<(Vec<u32>, Vec<u32>)> = items
            .iter()
            .map(|i| (i.text.clone(), i.codes.stream(0).to_vec()))
            .collect();
        let lengths = items.iter().map(|(t, c)| t.len() + 1 + c.len()).collect();
        Self {
            items,
            lengths,
            config: config.clone(),
            bucket,
        }
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
        let items: Vec<(&[u32], &[u32])> = indices
            .iter()
            .map(|&i| (self.items[i].0.as_slice(), self.items[i].1.as_slice()))
            .collect();
        let host = host_batch(&self.config, &items)?;
        Ok(MtpBatch::from_host(host, self.config.n_heads, device))
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
        let logits = model.forward(batch.ids.clone()).map_err(TrainError::task)?;
        let (total, per_head) = mtp_loss(logits, batch, &self.task.head_weights);
        Ok(Losses {
            total,
            terms: per_head
                .into_iter()
                .enumerate()
                .map(|(i, ce)| (format!("head{i}"), ce))
                .collect(),
        })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "mtp",
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
            "task": serde_json::to_value(&self.task).unwrap_or(serde_json::Value::Null),
        })
    }
}
