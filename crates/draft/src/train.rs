//! Fine-tuning a draft through the shared loop: cross-entropy on the target's training data
//! (SSD's objective) plus an optional distillation term, the KL divergence from the frozen
//! target's next-token distribution to the draft's, computed on the fly:
//!
//! ```text
//! loss = CE(draft head 0, data)  +  λ · τ² · KL( softmax(target / τ) ‖ softmax(draft / τ) )
//! ```
//!
//! Freezing is the loop's: pass [`DraftSpec::freeze_patterns`] as `TrainConfig::freeze`.

use burn::module::Module;
use burn::tensor::Device;
use burn::tensor::activation::{log_softmax, softmax};
use serde::{Deserialize, Serialize};
use voxspec_mtp::{MtpBatch, MtpData, MtpModel, mtp_loss};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use crate::build::{DraftSpec, build_draft};

/// The distillation term.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DistillConfig {
    /// Weight λ of the KL term (0 turns it off and skips the target's forward).
    pub weight: f32,
    /// Softmax temperature τ of both distributions.
    pub temperature: f32,
}

impl Default for DistillConfig {
    fn default() -> Self {
        Self {
            weight: 0.0,
            temperature: 1.0,
        }
    }
}

/// A draft model as a [`TrainTask`].
pub struct DraftTask {
    /// The target the draft is cut from; it must live on the training device. Never updated.
    pub target: MtpModel,
    /// Layers kept and trained.
    pub spec: DraftSpec,
    /// Optional distillation from the target.
    pub distill: DistillConfig,
    /// Training pairs (built for one head).
    pub train: MtpData,
    /// Validation pairs.
    pub valid: Option<MtpData>,
    /// Where the target came from (checkpoint path, config), recorded in `config.json`.
    pub target_info: serde_json::Value,
}

impl TrainTask for DraftTask {
    type Model = MtpModel;
    type Batch = MtpBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<MtpModel> {
        let draft = build_draft(&self.target, &self.spec).map_err(TrainError::task)?;
        // The target is usually `no_grad`; the loop's freeze list decides what trains.
        Ok(draft.to_device(device).set_require_grad(true))
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
        let hidden = model
            .hidden(batch.ids.clone(), batch.track.clone())
            .map_err(TrainError::task)?;
        let logits = model.head_logits(hidden, 1);
        let draft_logits = logits[0].clone();
        let (ce, _) = mtp_loss(logits, batch, &[1.0]);
        let mut terms = vec![("ce".to_string(), ce.clone())];
        let mut total = ce;
        if self.distill.weight > 0.0 {
            let tau = self.distill.temperature;
            let hidden = self
                .target
                .hidden(batch.ids.clone(), batch.track.clone())
                .map_err(TrainError::task)?;
            // [batch, time, vocab], no gradient into the target
            let target_logits = self.target.head_logits(hidden, 1)[0].clone().detach();
            let q = softmax(target_logits.clone() / tau, 2);
            let log_q = log_softmax(target_logits / tau, 2);
            let log_p = log_softmax(draft_logits / tau, 2);
            let [_, b, t] = batch.weights.dims();
            let mask = batch.weights.clone().narrow(0, 0, 1).reshape([b, t]);
            // KL per position: Σ_v q (log q − log p) → [batch, time]
            let kl = (q * (log_q - log_p)).sum_dim(2).reshape([b, t]);
            let count = mask.clone().sum().clamp_min(1.0);
            let kl = (kl * mask).sum() / count * (tau * tau);
            total = total + kl.clone() * self.distill.weight;
            terms.push(("kl".to_string(), kl));
        }
        Ok(Losses { total, terms })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "draft",
            "spec": serde_json::to_value(&self.spec).unwrap_or(serde_json::Value::Null),
            "distill": serde_json::to_value(self.distill).unwrap_or(serde_json::Value::Null),
            "target": self.target_info,
        })
    }
}
