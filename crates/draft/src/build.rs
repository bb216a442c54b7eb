//! Building a draft from a target AR model (Lin et al. 2025, "Accelerating Autoregressive Speech
//! Synthesis Inference With Speech Speculative Decoding", §2.2): keep a few of the target's
//! layers — SSD takes the first 2 and the last 6 of 24 — with its embedding, final norm and
//! next-token head; train only the lower layers and the head, freeze the rest.
//!
//! ```text
//! target layers:  0  1  2  3 … 21 22 23           --layers 0,1,-2,-1
//! draft layers:   0  1              2  3          (copies; the draft keeps head 0 only)
//! trained:        ✓  ✓              ✗  ✗   + head  (lower layers = the non-negative indices)
//! frozen:         embedding, the upper layers, the final norm
//! ```

use serde::{Deserialize, Serialize};
use voxspec_mtp::MtpModel;

use crate::error::{DraftError, Result};

/// Which target layers a draft keeps and which of them it trains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftSpec {
    /// Target layer indices in draft order; negative ones count from the end (−1 = last).
    pub layers: Vec<i64>,
    /// Draft layer indices that are trained; `None`: those given by non-negative indices
    /// (the lower layers).
    pub train_layers: Option<Vec<usize>>,
}

impl DraftSpec {
    /// Parses `"0,1,-2,-1"`.
    ///
    /// # Errors
    /// [`DraftError::Layers`] for an empty list or a part that is not an integer.
    pub fn parse(layers: &str) -> Result<Self> {
        let parsed = layers
            .split(',')
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.parse::<i64>().map_err(|_| DraftError::Layers {
                    spec: layers.into(),
                    detail: format!("{p:?} is not a layer index"),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if parsed.is_empty() {
            return Err(DraftError::Layers {
                spec: layers.into(),
                detail: "no layer given".into(),
            });
        }
        Ok(Self {
            layers: parsed,
            train_layers: None,
        })
    }

    fn describe(&self) -> String {
        self.layers
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The target layer indices for a target of `n_layers`, checked: each exists, none twice,
    /// and fewer than the target has (a draft as deep as its target saves nothing).
    ///
    /// # Errors
    /// [`DraftError::Layers`] naming the index at fault.
    pub fn resolve(&self, n_layers: usize) -> Result<Vec<usize>> {
        let fail = |detail: String| DraftError::Layers {
            spec: self.describe(),
            detail,
        };
        if self.layers.len() >= n_layers {
            return Err(fail(format!(
                "a draft of {} layers is not shorter than its target of {n_layers}",
                self.layers.len()
            )));
        }
        let mut resolved = Vec::with_capacity(self.layers.len());
        for &i in &self.layers {
            let idx = if i < 0 { n_layers as i64 + i } else { i };
            if !(0..n_layers as i64).contains(&idx) {
                return Err(fail(format!(
                    "layer {i} does not exist in a target of {n_layers} layers"
                )));
            }
            let idx = idx as usize;
            if resolved.contains(&idx) {
                return Err(fail(format!("target layer {idx} is selected twice")));
            }
            resolved.push(idx);
        }
        Ok(resolved)
    }

    /// Draft layer indices that are trained.
    ///
    /// # Errors
    /// [`DraftError::Layers`] when an explicit index is not a draft layer.
    pub fn trained_layers(&self) -> Result<Vec<usize>> {
        match &self.train_layers {
            Some(explicit) => {
                if let Some(&bad) = explicit.iter().find(|&&i| i >= self.layers.len()) {
                    return Err(DraftError::Layers {
                        spec: self.describe(),
                        detail: format!(
                            "trained layer {bad} is not one of the draft's {} layers",
                            self.layers.len()
                        ),
                    });
                }
                Ok(explicit.clone())
            }
            None => Ok(self
                .layers
                .iter()
                .enumerate()
                .filter(|(_, i)| **i >= 0)
                .map(|(d, _)| d)
                .collect()),
        }
    }

    /// Regexes over the draft's parameter paths (for `TrainConfig::freeze`) that freeze
    /// everything except the trained layers and the head.
    ///
    /// # Errors
    /// As [`trained_layers`](Self::trained_layers).
    pub fn freeze_patterns(&self) -> Result<Vec<String>> {
        let trained = self.trained_layers()?;
        let mut patterns = vec![
            r"^embedding\.".to_string(),
            r"^track\.".to_string(),
            r"^duration\.".to_string(),
            r"^transformer\.norm\.".to_string(),
            r"^transformer\.positions\.".to_string(),
        ];
        patterns.extend(
            (0..self.layers.len())
                .filter(|d| !trained.contains(d))
                .map(|d| format!(r"^transformer\.blocks\.{d}\.")),
        );
        Ok(patterns)
    }
}

/// A draft made of `spec`'s layers of `target`, sharing (copies of) its embedding, positions,
/// final norm and next-token head.
///
/// # Errors
/// [`DraftError::Layers`] for a bad selection.
pub fn build_draft(target: &MtpModel, spec: &DraftSpec) -> Result<MtpModel> {
    let layers = spec.resolve(target.transformer.n_layers())?;
    spec.trained_layers()?;
    let transformer = target.transformer.select_layers(&layers)?;
    let head = target.heads[..1].to_vec();
    Ok(MtpModel::from_parts(
        target.embedding.clone(),
        transformer,
        head,
        target.track.clone().zip(target.duration.clone()),
        target.text_vocab(),
        target.codebook_size(),
    )?)
}
