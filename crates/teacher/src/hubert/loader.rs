//! Loading Hugging Face HuBERT checkpoints (`config.json` + `model.safetensors`).
//!
//! Every tensor the model needs must be in the file with the shape the config implies, and
//! every tensor of the file must be consumed, except the ones listed in [`IGNORED`] and, for
//! task checkpoints (`HubertForCTC`, `…ForSequenceClassification`), anything outside the
//! `hubert.` / `wav2vec2.` prefix (`lm_head.*`, `projector.*`, `classifier.*`).

use std::path::Path;

use burn::module::Param;
use burn::nn::conv::Conv1d;
use burn::nn::{GroupNorm, LayerNorm, Linear};
use burn::tensor::{Device, Tensor};
use serde::Deserialize;
use voxspec_nn::weights::{WeightFile, read_bytes, read_json};

use super::{FeatExtractNorm, HiddenAct, Hubert, HubertConfig};
use crate::error::TeacherError;

/// Hugging Face tensor name → Burn module path. `{i}`: feature-encoder layer, `{l}`:
/// transformer layer, `{wb}`: `weight`|`bias`, `{proj}`: `q`|`k`|`v`|`out`.
///
/// - Linear weights are stored `[out, in]` by PyTorch and transposed to Burn's `[in, out]`.
/// - Norm `weight`/`bias` become `gamma`/`beta`.
/// - The positional convolution is weight-normalised over dim 2 in the checkpoint:
///   `weight = g · v / ‖v‖` (norm over dims 0 and 1, per kernel tap) is folded at load time.
///   `g`/`v` are `weight_g`/`weight_v` (PyTorch's old `weight_norm`) or
///   `parametrizations.weight.original0`/`original1` (new parametrisation API); an already
///   folded `weight` is accepted too.
pub const KEY_MAP: &[(&str, &str)] = &[
    (
        "feature_extractor.conv_layers.{i}.conv.{wb}",
        "feature_extractor.conv_layers.{i}.conv.{wb}",
    ),
    (
        // feat_extract_norm = "group": first layer only.
        "feature_extractor.conv_layers.0.layer_norm.{wb}",
        "feature_extractor.conv_layers.0.group_norm.{gamma|beta}",
    ),
    (
        // feat_extract_norm = "layer": every layer.
        "feature_extractor.conv_layers.{i}.layer_norm.{wb}",
        "feature_extractor.conv_layers.{i}.layer_norm.{gamma|beta}",
    ),
    (
        "feature_projection.layer_norm.{wb}",
        "feature_projection.layer_norm.{gamma|beta}",
    ),
    (
        "feature_projection.projection.{wb}",
        "feature_projection.projection.{wb} (weight transposed)",
    ),
    (
        "encoder.pos_conv_embed.conv.weight_{g|v}",
        "encoder.pos_conv_embed.conv.weight (folded)",
    ),
    (
        "encoder.pos_conv_embed.conv.parametrizations.weight.original{0|1}",
        "encoder.pos_conv_embed.conv.weight (folded)",
    ),
    (
        "encoder.pos_conv_embed.conv.bias",
        "encoder.pos_conv_embed.conv.bias",
    ),
    ("encoder.layer_norm.{wb}", "encoder.layer_norm.{gamma|beta}"),
    (
        "encoder.layers.{l}.attention.{proj}_proj.{wb}",
        "encoder.layers.{l}.attention.{proj}_proj.{wb} (weight transposed)",
    ),
    (
        "encoder.layers.{l}.layer_norm.{wb}",
        "encoder.layers.{l}.layer_norm.{gamma|beta}",
    ),
    (
        "encoder.layers.{l}.feed_forward.intermediate_dense.{wb}",
        "encoder.layers.{l}.feed_forward.intermediate_dense.{wb} (weight transposed)",
    ),
    (
        "encoder.layers.{l}.feed_forward.output_dense.{wb}",
        "encoder.layers.{l}.feed_forward.output_dense.{wb} (weight transposed)",
    ),
    (
        "encoder.layers.{l}.final_layer_norm.{wb}",
        "encoder.layers.{l}.final_layer_norm.{gamma|beta}",
    ),
];

/// Tensors of the checkpoint that inference does not use (the SpecAugment mask embedding).
pub const IGNORED: &[&str] = &["masked_spec_embed"];

/// Prefixes of the base model inside task checkpoints (`HubertForCTC`, `Wav2Vec2ForCTC`).
const MODEL_PREFIXES: &[&str] = &["hubert.", "wav2vec2."];

/// The weight file name inside a Hugging Face model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The config file name inside a Hugging Face model directory.
pub const CONFIG_FILE: &str = "config.json";
/// The feature-extractor config (sample rate, input normalisation), optional.
pub const PREPROCESSOR_FILE: &str = "preprocessor_config.json";

/// The fields of Hugging Face's `HubertConfig` / `Wav2Vec2Config` that matter for inference.
/// Missing fields take `HubertConfig` defaults (hubert-base).
#[derive(Deserialize)]
#[serde(default)]
struct HfConfig {
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    conv_dim: Vec<usize>,
    conv_kernel: Vec<usize>,
    conv_stride: Vec<usize>,
    conv_bias: bool,
    feat_extract_norm: String,
    feat_extract_activation: String,
    feat_proj_layer_norm: bool,
    num_conv_pos_embeddings: usize,
    num_conv_pos_embedding_groups: usize,
    layer_norm_eps: f64,
    do_stable_layer_norm: bool,
    hidden_act: String,
    conv_pos_batch_norm: bool,
    adapter_attn_dim: Option<usize>,
}

impl Default for HfConfig {
    fn default() -> Self {
        let base = HubertConfig::hubert_base();
        Self {
            hidden_size: base.hidden_size,
            num_hidden_layers: base.num_hidden_layers,
            num_attention_heads: base.num_attention_heads,
            intermediate_size: base.intermediate_size,
            conv_dim: base.conv_dim,
            conv_kernel: base.conv_kernel,
            conv_stride: base.conv_stride,
            conv_bias: base.conv_bias,
            feat_extract_norm: "group".into(),
            feat_extract_activation: "gelu".into(),
            feat_proj_layer_norm: base.feat_proj_layer_norm,
            num_conv_pos_embeddings: base.num_conv_pos_embeddings,
            num_conv_pos_embedding_groups: base.num_conv_pos_embedding_groups,
            layer_norm_eps: base.layer_norm_eps,
            do_stable_layer_norm: base.do_stable_layer_norm,
            hidden_act: "gelu".into(),
            conv_pos_batch_norm: false,
            adapter_attn_dim: None,
        }
    }
}

/// `preprocessor_config.json` (`Wav2Vec2FeatureExtractor`).
#[derive(Deserialize)]
#[serde(default)]
struct HfPreprocessorConfig {
    sampling_rate: u32,
    do_normalize: bool,
}

impl Default for HfPreprocessorConfig {
    fn default() -> Self {
        let base = HubertConfig::hubert_base();
        Self {
            sampling_rate: base.sampling_rate,
            do_normalize: base.do_normalize,
        }
    }
}

fn parse_act(field: &'static str, name: &str) -> Result<HiddenAct, TeacherError> {
    match name {
        "gelu" => Ok(HiddenAct::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(HiddenAct::GeluTanh),
        "relu" => Ok(HiddenAct::Relu),
        "silu" | "swish" => Ok(HiddenAct::Silu),
        other => Err(TeacherError::InvalidConfig {
            field,
            reason: format!("unsupported activation {other:?}"),
        }),
    }
}

impl HubertConfig {
    /// Reads a Hugging Face `config.json` (`HubertConfig` or `Wav2Vec2Config` field names),
    /// plus `sampling_rate` and `do_normalize` from a `preprocessor_config.json` beside it when
    /// there is one.
    ///
    /// # Errors
    /// Unreadable or malformed files (named), unsupported settings (`conv_pos_batch_norm`,
    /// adapters, unknown activations or norms) and inconsistent fields.
    pub fn from_hf_json(path: impl AsRef<Path>) -> Result<Self, TeacherError> {
        let path = path.as_ref();
        let hf: HfConfig = read_json(path)?;
        let feat_extract_norm = match hf.feat_extract_norm.as_str() {
            "group" => FeatExtractNorm::Group,
            "layer" => FeatExtractNorm::Layer,
            other => {
                return Err(TeacherError::InvalidConfig {
                    field: "feat_extract_norm",
                    reason: format!("{other:?} is neither \"group\" nor \"layer\""),
                });
            }
        };
        if hf.conv_pos_batch_norm {
            return Err(TeacherError::InvalidConfig {
                field: "conv_pos_batch_norm",
                reason: "batch-normalised positional convolution is not supported".into(),
            });
        }
        if hf.adapter_attn_dim.is_some() {
            return Err(TeacherError::InvalidConfig {
                field: "adapter_attn_dim",
                reason: "attention adapters are not supported".into(),
            });
        }
        let preprocessor_path = path.with_file_name(PREPROCESSOR_FILE);
        let pre: HfPreprocessorConfig = if preprocessor_path.is_file() {
            read_json(&preprocessor_path)?
        } else {
            HfPreprocessorConfig::default()
        };
        let config = HubertConfig::new()
            .with_hidden_size(hf.hidden_size)
            .with_num_hidden_layers(hf.num_hidden_layers)
            .with_num_attention_heads(hf.num_attention_heads)
            .with_intermediate_size(hf.intermediate_size)
            .with_conv_dim(hf.conv_dim)
            .with_conv_kernel(hf.conv_kernel)
            .with_conv_stride(hf.conv_stride)
            .with_conv_bias(hf.conv_bias)
            .with_feat_extract_norm(feat_extract_norm)
            .with_feat_extract_activation(parse_act(
                "feat_extract_activation",
                &hf.feat_extract_activation,
            )?)
            .with_feat_proj_layer_norm(hf.feat_proj_layer_norm)
            .with_num_conv_pos_embeddings(hf.num_conv_pos_embeddings)
            .with_num_conv_pos_embedding_groups(hf.num_conv_pos_embedding_groups)
            .with_layer_norm_eps(hf.layer_norm_eps)
            .with_do_stable_layer_norm(hf.do_stable_layer_norm)
            .with_hidden_act(parse_act("hidden_act", &hf.hidden_act)?)
            .with_sampling_rate(pre.sampling_rate)
            .with_do_normalize(pre.do_normalize);
        config.validate()?;
        Ok(config)
    }
}

impl Hubert {
    /// Loads a Hugging Face checkpoint: either a model directory holding `config.json` and
    /// `model.safetensors` (and optionally `preprocessor_config.json`), or the path of a
    /// `.safetensors` file with `config.json` beside it.
    ///
    /// # Errors
    /// Unreadable or malformed files, missing or unexpected tensors and shape mismatches, each
    /// naming the file and tensor.
    pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Self, TeacherError> {
        let path = path.as_ref();
        let (config_path, weights_path) = if path.is_dir() {
            (path.join(CONFIG_FILE), path.join(WEIGHTS_FILE))
        } else {
            (path.with_file_name(CONFIG_FILE), path.to_path_buf())
        };
        let config = HubertConfig::from_hf_json(&config_path)?;
        Self::load_safetensors(&config, &weights_path, device)
    }

    /// Builds the model described by `config` with the weights of a safetensors file in the
    /// Hugging Face layout (see [`KEY_MAP`]).
    ///
    /// # Errors
    /// As [`Hubert::load`].
    pub fn load_safetensors(
        config: &HubertConfig,
        path: impl AsRef<Path>,
        device: &Device,
    ) -> Result<Self, TeacherError> {
        let path = path.as_ref();
        config.validate()?;
        let bytes = read_bytes(path)?;
        let file = WeightFile::parse(&bytes, path, device)?;
        let prefix = model_prefix(&file);
        let mut weights = HubertWeights {
            file: file.with_prefix(prefix),
        };
        let mut model = config.init(device);
        weights.assign(&mut model)?;
        weights.file.check_unused(IGNORED)?;
        tracing::info!(
            path = %path.display(),
            tensors = weights.file.used_count(),
            layers = config.num_hidden_layers,
            "loaded HuBERT weights"
        );
        Ok(model)
    }
}

/// A HuBERT weight file being assigned to the modules of a [`Hubert`].
struct HubertWeights<'a> {
    file: WeightFile<'a>,
}

/// Where the base model sits in the file: `""`, `"hubert."` or `"wav2vec2."` (task
/// checkpoints).
fn model_prefix(file: &WeightFile<'_>) -> &'static str {
    let probe = "feature_projection.projection.weight";
    let names = file.names();
    MODEL_PREFIXES
        .iter()
        .copied()
        .find(|p| !names.contains(&probe) && names.contains(&format!("{p}{probe}").as_str()))
        .unwrap_or("")
}

impl HubertWeights<'_> {
    fn linear(&mut self, linear: &mut Linear, name: &str) -> Result<(), TeacherError> {
        let [d_in, d_out] = linear.weight.shape().dims();
        // PyTorch [out, in] → Burn [in, out].
        let weight = self.file.read(&format!("{name}.weight"), [d_out, d_in])?;
        linear.weight = Param::from_tensor(weight.transpose());
        if linear.bias.is_some() {
            let bias = self.file.read(&format!("{name}.bias"), [d_out])?;
            linear.bias = Some(Param::from_tensor(bias));
        }
        Ok(())
    }

    fn layer_norm(&mut self, norm: &mut LayerNorm, name: &str) -> Result<(), TeacherError> {
        let [d] = norm.gamma.shape().dims();
        norm.gamma = Param::from_tensor(self.file.read(&format!("{name}.weight"), [d])?);
        if norm.beta.is_some() {
            norm.beta = Some(Param::from_tensor(
                self.file.read(&format!("{name}.bias"), [d])?,
            ));
        }
        Ok(())
    }

    fn group_norm(&mut self, norm: &mut GroupNorm, name: &str) -> Result<(), TeacherError> {
        let d = norm.num_channels;
        if norm.gamma.is_some() {
            norm.gamma = Some(Param::from_tensor(
                self.file.read(&format!("{name}.weight"), [d])?,
            ));
        }
        if norm.beta.is_some() {
            norm.beta = Some(Param::from_tensor(
                self.file.read(&format!("{name}.bias"), [d])?,
            ));
        }
        Ok(())
    }

    fn conv_bias(&mut self, conv: &mut Conv1d, name: &str) -> Result<(), TeacherError> {
        if conv.bias.is_some() {
            let [c_out, _, _] = conv.weight.shape().dims();
            conv.bias = Some(Param::from_tensor(
                self.file.read(&format!("{name}.bias"), [c_out])?,
            ));
        }
        Ok(())
    }

    fn conv(&mut self, conv: &mut Conv1d, name: &str) -> Result<(), TeacherError> {
        let shape: [usize; 3] = conv.weight.shape().dims();
        conv.weight = Param::from_tensor(self.file.read(&format!("{name}.weight"), shape)?);
        self.conv_bias(conv, name)
    }

    /// A convolution weight-normalised over dim 2: `weight = g · v / ‖v‖`, the norm taken over
    /// dims 0 and 1 separately for each kernel tap.
    fn weight_norm_conv(&mut self, conv: &mut Conv1d, name: &str) -> Result<(), TeacherError> {
        let shape: [usize; 3] = conv.weight.shape().dims();
        let pairs = [
            ("weight_g", "weight_v"),
            (
                "parametrizations.weight.original0",
                "parametrizations.weight.original1",
            ),
        ];
        let found = pairs
            .iter()
            .find(|(g, _)| self.file.contains(&format!("{name}.{g}")));
        let weight = match found {
            Some((g, v)) => {
                let g: Tensor<3> = self.file.read(&format!("{name}.{g}"), [1, 1, shape[2]])?;
                let v: Tensor<3> = self.file.read(&format!("{name}.{v}"), shape)?;
                let norm = (v.clone() * v.clone()).sum_dim(0).sum_dim(1).sqrt(); // [1, 1, k]
                v * (g / norm)
            }
            // Already folded (or a missing tensor: the error names the plain weight).
            None => self.file.read(&format!("{name}.weight"), shape)?,
        };
        conv.weight = Param::from_tensor(weight);
        self.conv_bias(conv, name)
    }

    /// Assigns every parameter of `model` from the file (see [`KEY_MAP`]).
    fn assign(&mut self, model: &mut Hubert) -> Result<(), TeacherError> {
        for (i, layer) in model.feature_extractor.conv_layers.iter_mut().enumerate() {
            let name = format!("feature_extractor.conv_layers.{i}");
            self.conv(&mut layer.conv, &format!("{name}.conv"))?;
            if let Some(norm) = &mut layer.group_norm {
                self.group_norm(norm, &format!("{name}.layer_norm"))?;
            }
            if let Some(norm) = &mut layer.layer_norm {
                self.layer_norm(norm, &format!("{name}.layer_norm"))?;
            }
        }
        let projection = &mut model.feature_projection;
        if let Some(norm) = &mut projection.layer_norm {
            self.layer_norm(norm, "feature_projection.layer_norm")?;
        }
        self.linear(&mut projection.projection, "feature_projection.projection")?;
        let encoder = &mut model.encoder;
        self.weight_norm_conv(
            &mut encoder.pos_conv_embed.conv,
            "encoder.pos_conv_embed.conv",
        )?;
        self.layer_norm(&mut encoder.layer_norm, "encoder.layer_norm")?;
        for (l, layer) in encoder.layers.iter_mut().enumerate() {
            let name = format!("encoder.layers.{l}");
            let attention = &mut layer.attention;
            self.linear(&mut attention.q_proj, &format!("{name}.attention.q_proj"))?;
            self.linear(&mut attention.k_proj, &format!("{name}.attention.k_proj"))?;
            self.linear(&mut attention.v_proj, &format!("{name}.attention.v_proj"))?;
            self.linear(
                &mut attention.out_proj,
                &format!("{name}.attention.out_proj"),
            )?;
            self.layer_norm(&mut layer.layer_norm, &format!("{name}.layer_norm"))?;
            let ff = &mut layer.feed_forward;
            self.linear(
                &mut ff.intermediate_dense,
                &format!("{name}.feed_forward.intermediate_dense"),
            )?;
            self.linear(
                &mut ff.output_dense,
                &format!("{name}.feed_forward.output_dense"),
            )?;
            self.layer_norm(
                &mut layer.final_layer_norm,
                &format!("{name}.final_layer_norm"),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_config_defaults_are_hubert_base() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(&path, r#"{"model_type": "hubert", "vocab_size": 32}"#).unwrap();
        let config = HubertConfig::from_hf_json(&path).unwrap();
        let base = HubertConfig::hubert_base();
        assert_eq!(config.hidden_size, base.hidden_size);
        assert_eq!(config.conv_kernel, base.conv_kernel);
        assert!(matches!(config.feat_extract_norm, FeatExtractNorm::Group));
        assert!(!config.do_normalize);
    }

    #[test]
    fn hf_config_errors_name_the_field_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(&path, r#"{"feat_extract_norm": "batch"}"#).unwrap();
        let err = HubertConfig::from_hf_json(&path).unwrap_err().to_string();
        assert!(err.contains("feat_extract_norm"), "{err}");
        std::fs::write(&path, "not json").unwrap();
        let err = HubertConfig::from_hf_json(&path).unwrap_err().to_string();
        assert!(err.contains("config.json"), "{err}");
        std::fs::write(&path, "{}").unwrap();
        std::fs::write(
            dir.path().join(PREPROCESSOR_FILE),
            r#"{"sampling_rate": 16000, "do_normalize": true}"#,
        )
        .unwrap();
        assert!(HubertConfig::from_hf_json(&path).unwrap().do_normalize);
    }
}
