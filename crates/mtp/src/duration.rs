//! The duration predictor of an aligned AR model (FastSpeech-style): a small bidirectional
//! transformer over the text phones that predicts each phone's length in codec frames, trained
//! with the AR model on forced-alignment durations (MSE on `ln(1 + frames)`).

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use voxspec_nn::{Transformer, TransformerConfig};

use crate::error::{MtpError, Result};

/// Phones → log durations.
#[derive(Module, Debug)]
pub struct DurationPredictor {
    /// Text ids → `d_model`.
    pub embedding: Embedding,
    /// Bidirectional encoder.
    pub encoder: Transformer,
    /// `d_model → 1`: `ln(1 + frames)`.
    pub out: Linear,
}

impl DurationPredictor {
    /// A fresh predictor: `layers` bidirectional layers of width `d_model` (`heads` attention
    /// heads, SwiGLU width `2·d_model`, dropout `dropout`).
    ///
    /// # Errors
    /// The transformer's own config errors.
    pub fn init(
        vocab: usize,
        d_model: usize,
        heads: usize,
        layers: usize,
        dropout: f64,
        max_len: usize,
        device: &Device,
    ) -> Result<Self> {
        let encoder = TransformerConfig::new()
            .with_d_model(d_model)
            .with_n_heads(heads)
            .with_n_layers(layers)
            .with_d_ff(2 * d_model)
            .with_causal(false)
            .with_max_seq_len(max_len)
            .with_dropout(dropout)
            .init(device)?;
        Ok(Self {
            embedding: EmbeddingConfig::new(vocab, d_model).init(device),
            encoder,
            out: LinearConfig::new(d_model, 1).init(device),
        })
    }

    /// Predicted `ln(1 + frames)` of every phone.
    ///
    /// # Shapes
    /// - `ids`: `[batch, len]` text ids (right-padded)
    /// - `mask`: `[batch, len]`, true at real phones
    /// - output: `[batch, len]` (unspecified at padding)
    ///
    /// # Errors
    /// [`MtpError::Nn`] when `len` passes the encoder's context.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2, Bool>) -> Result<Tensor<2>> {
        let [batch, len] = ids.dims();
        let x = self.embedding.forward(ids);
        let h = self.encoder.forward(x, Some(mask))?;
        Ok(self.out.forward(h).reshape([batch, len]))
    }

    /// Frames of each phone of one text: `round(exp(prediction) − 1)`, at least one, scaled by
    /// `pace` (> 1 speaks slower). Rounding carries its remainder to the next phone so the total
    /// is the rounded sum.
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] for empty text or a non-positive pace; the encoder's errors.
    pub fn predict(&self, text: &[u32], pace: f32) -> Result<Vec<u32>> {
        if text.is_empty() {
            return Err(MtpError::InvalidInput {
                detail: "the text has no tokens".into(),
            });
        }
        if !(pace.is_finite() && pace > 0.0) {
            return Err(MtpError::InvalidInput {
                detail: format!("pace must be positive, got {pace}"),
            });
        }
        let device = self.embedding.weight.val().device();
        let ids: Vec<i64> = text.iter().map(|&t| i64::from(t)).collect();
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [1, text.len()]), &device);
        let mask = Tensor::<2, Bool>::from_data(
            TensorData::new(vec![true; text.len()], [1, text.len()]),
            &device,
        );
        let logd = self
            .forward(ids, mask)?
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| MtpError::Readback(format!("{e:?}")))?;
        Ok(round_durations(&logd, pace))
    }
}

/// `round(pace · (exp(x) − 1))` per phone with the rounding remainder carried forward, each at
/// least one frame.
pub fn round_durations(log1p_frames: &[f32], pace: f32) -> Vec<u32> {
    let mut carry = 0.0f32;
    log1p_frames
        .iter()
        .map(|&x| {
            let want = (x.exp() - 1.0).max(0.0) * pace + carry;
            let frames = want.round().max(1.0);
            carry = want - frames;
            frames as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::round_durations;

    #[test]
    fn rounding_keeps_the_total_and_a_frame_each() {
        let x: Vec<f32> = [2.4f32, 2.4, 2.4, 0.0].iter().map(|f| f.ln_1p()).collect();
        let d = round_durations(&x, 1.0);
        assert_eq!(d.iter().sum::<u32>(), 8, "{d:?}"); // 7.2 frames → 7, plus the forced one
        assert!(d.iter().all(|&f| f >= 1));
        let slow = round_durations(&x, 2.0);
        assert!(slow.iter().sum::<u32>() > d.iter().sum::<u32>());
    }
}
