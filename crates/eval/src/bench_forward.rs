//! The model the forward benchmark (`voxspec_tts::run_forward_bench`) measures: a trained AR
//! model, or a random one of a given configuration or shape, sized for the positions the
//! benchmark needs.

use std::path::Path;

use burn::tensor::Device;
use voxspec_mtp::{MtpConfig, MtpModel, load_mtp};
use voxspec_nn::TransformerConfig;

use crate::error::{EvalError, Result};

/// Text vocabulary of the random models (the benchmark feeds them no text).
const RANDOM_TEXT_VOCAB: usize = 16;

/// Which model is measured.
#[derive(Debug, Clone)]
pub enum ForwardModel<'a> {
    /// A trained AR model directory (`voxspec train mtp`), as it is.
    Dir(&'a Path),
    /// A random model of this configuration (a training preset's); its head count, dropout
    /// and context are set for the benchmark.
    Random(MtpConfig),
    /// A random model of this width and depth: 8 attention heads, a feed-forward width of
    /// 4 × `d_model`.
    Shape {
        /// Model width.
        d_model: usize,
        /// Transformer layers.
        layers: usize,
    },
}

/// The model `source` names on `device`, with its configuration. A random model gets
/// `mtp_heads` heads (at least one), no dropout, and room for at least `positions`
/// positions; `codebook` is its codebook size when its shape is given.
///
/// # Errors
/// [`EvalError::Context`] naming a model directory that cannot be loaded; [`EvalError::Mtp`]
/// for a configuration that describes no model.
pub fn forward_bench_model(
    source: ForwardModel<'_>,
    codebook: usize,
    mtp_heads: usize,
    positions: usize,
    device: &Device,
) -> Result<(MtpConfig, MtpModel)> {
    let config = match source {
        ForwardModel::Dir(dir) => {
            let (file, model) = load_mtp(dir, device).map_err(|e| {
                EvalError::from(e).context(format!("loading the AR model {}", dir.display()))
            })?;
            return Ok((file.model, model));
        }
        ForwardModel::Random(config) => {
            let mut config = config.with_n_heads(mtp_heads.max(1));
            let t = &mut config.transformer;
            t.dropout = 0.0;
            t.max_seq_len = t.max_seq_len.max(positions);
            config
        }
        ForwardModel::Shape { d_model, layers } => {
            let core = TransformerConfig::new()
                .with_d_model(d_model)
                .with_n_heads(8)
                .with_n_layers(layers)
                .with_d_ff(4 * d_model)
                .with_dropout(0.0)
                .with_max_seq_len(positions);
            MtpConfig::new(RANDOM_TEXT_VOCAB, codebook, core).with_n_heads(mtp_heads.max(1))
        }
    };
    let model = config.init(device)?;
    Ok((config, model))
}
