//! Training the NAR model through the shared loop. Each batch trains one layer `j ∈ 1..n_q`
//! (VALL-E samples the stage per step) with a prompt cut from the start of each utterance
//! (its own codes, all layers known), both drawn from a hash of (seed, epoch, batch) so the plan
//! is deterministic and resumable.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TtsItem, bucket_batches};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use crate::nar::{NarConfig, NarInput, NarItem, NarModel};
use crate::track::{FrameTrack, TrackLayout};

/// A batch: which layer is trained, and the raw items (the input is built by the model, which
/// owns the embedding tables' devices).
#[derive(Debug, Clone)]
pub struct NarBatch {
    /// The layer trained by this batch, `1..n_q`.
    pub stage: usize,
    /// (text, codes `[n_q][frames]`, prompt frames, track ids of every frame for an aligned
    /// model) per item.
    pub items: Vec<NarBatchItem>,
    /// Target frames (for throughput).
    pub frames: usize,
}

/// One item of a [`NarBatch`]: text, codes `[n_q][frames]`, prompt frames, and an aligned
/// model's track ids of every frame (the prompt's NONE, as at inference).
pub type NarBatchItem = (Vec<u32>, Vec<Vec<u32>>, usize, Option<Vec<u32>>);

/// Settings of a NAR training run beyond the model and the loop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NarTaskConfig {
    /// Training batches.
    pub bucket: BucketConfig,
    /// The prompt takes a fraction of each utterance drawn uniformly from this range.
    pub prompt_fraction: (f32, f32),
}

/// SplitMix64: a small, well-mixed hash for the per-batch draws.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One kept utterance: text, all code layers `[n_q][frames]`, alignment (aligned models).
type NarUtterance = (Vec<u32>, Vec<Vec<u32>>, Option<FrameTrack>);

/// (text, all code layers, alignment) items in memory with a deterministic plan.
#[derive(Debug, Clone)]
pub struct NarData {
    items: Vec<NarUtterance>,
    track: Option<TrackLayout>,
    lengths: Vec<usize>,
    n_q: usize,
    config: NarTaskConfig,
}

impl NarData {
    /// Keeps every item's text and codes, and, for an aligned model (`track`), its alignment.
    ///
    /// # Errors
    /// [`TrainError::Task`] when an item has fewer than `n_q` code layers, or, for an aligned
    /// model, no durations or durations that do not match its text and codes.
    pub fn new(
        items: &[TtsItem],
        n_q: usize,
        track: Option<TrackLayout>,
        config: NarTaskConfig,
    ) -> voxspec_train::Result<Self> {
        let mut kept = Vec::with_capacity(items.len());
        for item in items {
            if item.codes.n_q < n_q {
                return Err(TrainError::task(format!(
                    "utterance {} has {} code layers; the NAR model needs {n_q}",
                    item.id, item.codes.n_q
                )));
            }
            let layers: Vec<Vec<u32>> = (0..n_q).map(|q| item.codes.stream(q).to_vec()).collect();
            let alignment = match track {
                None => None,
                Some(_) => Some(
                    FrameTrack::checked(&item.text, item.durations.as_deref(), item.codes.n_frames)
                        .map_err(|detail| {
                            TrainError::task(format!(
                                "utterance {} {detail}; an aligned NAR model trains on phones with \
                             forced-alignment durations",
                                item.id
                            ))
                        })?,
                ),
            };
            kept.push((item.text.clone(), layers, alignment));
        }
        let lengths = kept
            .iter()
            .map(|(t, c, _)| t.len() + 1 + c[0].len())
            .collect();
        Ok(Self {
            items: kept,
            track,
            lengths,
            n_q,
            config,
        })
    }

    fn plan(&self, epoch: usize) -> voxspec_train::Result<Vec<Vec<usize>>> {
        bucket_batches(&self.lengths, &self.config.bucket, epoch as u64).map_err(TrainError::task)
    }
}

impl BatchSource<NarBatch> for NarData {
    fn batches_in_epoch(&self, epoch: usize) -> usize {
        self.plan(epoch).map(|p| p.len()).unwrap_or(0)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        _device: &Device,
    ) -> voxspec_train::Result<NarBatch> {
        let plan = self.plan(epoch)?;
        let indices = plan.get(index).ok_or_else(|| {
            TrainError::task(format!("batch {index} of epoch {epoch} does not exist"))
        })?;
        let key = mix(self.config.bucket.seed ^ mix(epoch as u64) ^ mix(index as u64 + 1));
        let stage = 1 + (key % (self.n_q as u64 - 1)) as usize;
        let (lo, hi) = self.config.prompt_fraction;
        let mut frames = 0;
        let items = indices
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let (text, codes, alignment) = &self.items[i];
                let n = codes[0].len();
                let u = (mix(key ^ k as u64) >> 11) as f32 / (1u64 << 53) as f32;
                let fraction = lo + (hi - lo) * u;
                let prompt = ((n as f32 * fraction) as usize).min(n.saturating_sub(1));
                frames += n - prompt;
                let track = match (self.track, alignment) {
                    (Some(layout), Some(a)) => {
                        let mut ids = Vec::with_capacity(n * layout.slots());
                        FrameTrack::push_none(prompt, &layout, &mut ids);
                        ids.extend(a.ids(&layout, prompt, n - prompt));
                        Some(ids)
                    }
                    _ => None,
                };
                (text.clone(), codes.clone(), prompt, track)
            })
            .collect();
        Ok(NarBatch {
            stage,
            items,
            frames,
        })
    }
}

/// The NAR model as a [`TrainTask`].
pub struct NarTask {
    /// The model to train.
    pub model: NarConfig,
    /// Batching and prompts.
    pub task: NarTaskConfig,
    /// Training pairs.
    pub train: NarData,
    /// Validation pairs.
    pub valid: Option<NarData>,
}

impl NarTask {
    fn input(model: &NarModel, batch: &NarBatch) -> voxspec_train::Result<NarInput> {
        let items: Vec<NarItem<'_>> = batch
            .items
            .iter()
            .map(|(t, c, p, track)| NarItem {
                text: t,
                codes: c,
                prompt: *p,
                track: track.as_deref(),
            })
            .collect();
        model.inputs(&items).map_err(TrainError::task)
    }
}

impl TrainTask for NarTask {
    type Model = NarModel;
    type Batch = NarBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<NarModel> {
        self.model.init(device).map_err(TrainError::task)
    }

    fn train_data(&self) -> &dyn BatchSource<NarBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<NarBatch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<NarBatch>)
    }

    fn batch_items(&self, batch: &NarBatch) -> usize {
        batch.frames
    }

    fn loss(
        &self,
        model: &NarModel,
        batch: &NarBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let input = Self::input(model, batch)?;
        let ce = model.loss(&input, batch.stage).map_err(TrainError::task)?;
        Ok(Losses {
            total: ce.clone(),
            terms: vec![(format!("layer{}", batch.stage), ce)],
        })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "nar",
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
            "task": serde_json::to_value(&self.task).unwrap_or(serde_json::Value::Null),
        })
    }
}
