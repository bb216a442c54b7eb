//! Loading checkpoints of the `speechtokenizer` package: its `config.json` and its state dict
//! saved as safetensors (`safetensors.torch.save_file(model.state_dict(), ...)`; the published
//! `SpeechTokenizer.pt` converts with one line of Python).
//!
//! Every tensor the config implies must be present with its shape and every tensor of the
//! file must be consumed; all differences are collected and reported together, each naming
//! the tensor and both shapes.
//!
//! Weight norm: the package wraps every convolution in `torch.nn.utils.weight_norm` (dim 0),
//! so a convolution is stored as `weight_g` `[d0, 1, 1]` and `weight_v` (the direction, same
//! shape as the weight). The loader folds them into the plain weight
//! `w = g · v / ‖v‖`, the norm taken over dims 1 and 2 for each index of dim 0 (output
//! channels of a `Conv1d`, input channels of a `ConvTranspose1d`); the parametrisation API's
//! `parametrizations.weight.original0/1` and an already folded `weight` are accepted too.
//! LSTM matrices are transposed to `[in, 4·hidden]`; the `transform` Linear to `[in, out]`.

use std::path::Path;

use burn::module::Param;
use burn::nn::Linear;
use burn::nn::conv::{Conv1d, ConvTranspose1d};
use burn::tensor::{Device, Tensor};
use serde::Deserialize;
use voxspec_nn::weights::{WeightError, WeightFile, read_bytes, read_json};

use super::layers::{LstmDirection, SLstm};
use super::seanet::{ResnetBlock, SeanetConfig};
use super::{SpeechTokenizer, SpeechTokenizerConfig};
use crate::error::CodecError;
use crate::quant::{EuclideanCodebook, replace_buffer};

/// Package tensor name → Burn module path. `{i}`: index in the package's `nn.Sequential`,
/// `{s}`: stage, `{j}`: residual block, `{k}`: LSTM layer, `{l}`: RVQ layer, `*`: the
/// convolution's weight (folded from `weight_g`/`weight_v`) and bias.
pub const KEY_MAP: &[(&str, &str)] = &[
    ("encoder.model.0.conv.conv.*", "encoder.first.conv.*"),
    (
        "encoder.model.{i}.block.1.conv.conv.*",
        "encoder.stages.{s}.res.{j}.conv1.conv.*",
    ),
    (
        "encoder.model.{i}.block.3.conv.conv.*",
        "encoder.stages.{s}.res.{j}.conv2.conv.*",
    ),
    (
        "encoder.model.{i}.shortcut.conv.conv.*",
        "encoder.stages.{s}.res.{j}.shortcut.conv.*",
    ),
    (
        "encoder.model.{i}.conv.conv.* (strided)",
        "encoder.stages.{s}.down.conv.*",
    ),
    (
        "encoder.model.{i}.lstm.{weight_ih|weight_hh|bias_ih|bias_hh}_l{k}[_reverse]",
        "encoder.lstm.layers.{k}.{forward|reverse}.{weight_ih|weight_hh|bias_ih|bias_hh}",
    ),
    ("encoder.model.{last}.conv.conv.*", "encoder.last.conv.*"),
    ("transform.{weight|bias}", "transform.{weight|bias}"),
    (
        "quantizer.vq.layers.{l}._codebook.{embed|embed_avg|cluster_size|inited}",
        "quantizer.layers.{l}.codebook.{embed|embed_avg|cluster_size|inited}",
    ),
    ("decoder.model.0.conv.conv.*", "decoder.first.conv.*"),
    ("decoder.model.1.lstm.*", "decoder.lstm.*"),
    (
        "decoder.model.{i}.convtr.convtr.*",
        "decoder.stages.{s}.up.convtr.*",
    ),
    (
        "decoder.model.{i}.{block.1|block.3|shortcut}.conv.conv.*",
        "decoder.stages.{s}.res.{j}.{conv1|conv2|shortcut}.conv.*",
    ),
    ("decoder.model.{last}.conv.conv.*", "decoder.last.conv.*"),
];

/// The weight file name inside a SpeechTokenizer model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The config file name inside a SpeechTokenizer model directory.
pub const CONFIG_FILE: &str = "config.json";

/// The package's `config.json` (`config/spt_base_cfg.json`); missing fields take its values.
#[derive(Deserialize)]
#[serde(default)]
struct PackageConfig {
    n_filters: usize,
    strides: Vec<usize>,
    dimension: usize,
    semantic_dimension: usize,
    bidirectional: bool,
    dilation_base: usize,
    residual_kernel_size: usize,
    n_residual_layers: usize,
    lstm_layers: usize,
    activation: String,
    codebook_size: usize,
    n_q: usize,
    sample_rate: u32,
}

impl Default for PackageConfig {
    fn default() -> Self {
        let base = SpeechTokenizerConfig::speechtokenizer_base();
        Self {
            n_filters: base.seanet.n_filters,
            strides: base.seanet.strides.clone(),
            dimension: base.seanet.dimension,
            semantic_dimension: base.semantic_dimension,
            bidirectional: base.seanet.bidirectional,
            dilation_base: base.seanet.dilation_base,
            residual_kernel_size: base.seanet.residual_kernel_size,
            n_residual_layers: base.seanet.n_residual_layers,
            lstm_layers: base.seanet.lstm_layers,
            activation: "ELU".into(),
            codebook_size: base.codebook_size,
            n_q: base.n_q,
            sample_rate: base.sample_rate,
        }
    }
}

impl SpeechTokenizerConfig {
    /// Reads the `speechtokenizer` package's `config.json`.
    ///
    /// # Errors
    /// Unreadable or malformed files (named), an activation other than ELU, inconsistent fields.
    pub fn from_package_json(path: impl AsRef<Path>) -> Result<Self, CodecError> {
        let path = path.as_ref();
        let pkg: PackageConfig = read_json(path)?;
        if pkg.activation != "ELU" {
            return Err(CodecError::InvalidConfig {
                field: "activation",
                reason: format!("only \"ELU\" is supported, got {:?}", pkg.activation),
            });
        }
        let config = Self::new()
            .with_sample_rate(pkg.sample_rate)
            .with_seanet(
                SeanetConfig::new()
                    .with_n_filters(pkg.n_filters)
                    .with_dimension(pkg.dimension)
                    .with_strides(pkg.strides)
                    .with_n_residual_layers(pkg.n_residual_layers)
                    .with_residual_kernel_size(pkg.residual_kernel_size)
                    .with_dilation_base(pkg.dilation_base)
                    .with_lstm_layers(pkg.lstm_layers)
                    .with_bidirectional(pkg.bidirectional),
            )
            .with_semantic_dimension(pkg.semantic_dimension)
            .with_n_q(pkg.n_q)
            .with_codebook_size(pkg.codebook_size);
        config.validate()?;
        Ok(config)
    }
}

impl SpeechTokenizer {
    /// Loads a `speechtokenizer` checkpoint: a directory with `config.json` and
    /// `model.safetensors`, or a `.safetensors` file with `config.json` beside it.
    ///
    /// # Errors
    /// Unreadable files, and a [`CodecError::CheckpointMismatch`] listing every missing,
    /// unexpected or wrongly shaped tensor.
    pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Self, CodecError> {
        let path = path.as_ref();
        let (config_path, weights_path) = if path.is_dir() {
            (path.join(CONFIG_FILE), path.join(WEIGHTS_FILE))
        } else {
            (path.with_file_name(CONFIG_FILE), path.to_path_buf())
        };
        let config = SpeechTokenizerConfig::from_package_json(&config_path)?;
        Self::load_safetensors(&config, &weights_path, device)
    }

    /// Builds the model of `config` with the weights of a package state dict (see [`KEY_MAP`]).
    ///
    /// # Errors
    /// As [`SpeechTokenizer::load`].
    pub fn load_safetensors(
        config: &SpeechTokenizerConfig,
        path: impl AsRef<Path>,
        device: &Device,
    ) -> Result<Self, CodecError> {
        let path = path.as_ref();
        let bytes = read_bytes(path)?;
        let file = WeightFile::parse(&bytes, path, device)?;
        let mut model = config.init(device)?;
        let mut ckpt = Checkpoint {
            file,
            problems: Vec::new(),
        };
        ckpt.assign(&mut model);
        if let Err(e) = ckpt.file.check_unused(&[]) {
            ckpt.problems.push(e.to_string());
        }
        if !ckpt.problems.is_empty() {
            return Err(CodecError::CheckpointMismatch {
                path: path.to_path_buf(),
                problems: ckpt.problems,
            });
        }
        tracing::info!(
            path = %path.display(),
            tensors = ckpt.file.used_count(),
            n_q = config.n_q,
            "loaded SpeechTokenizer weights"
        );
        Ok(model)
    }
}

/// A weight file being consumed, collecting every problem instead of stopping at the first.
struct Checkpoint<'a> {
    file: WeightFile<'a>,
    problems: Vec<String>,
}

impl Checkpoint<'_> {
    fn read<const D: usize>(&mut self, name: &str, shape: [usize; D]) -> Option<Tensor<D>> {
        match self.file.read(name, shape) {
            Ok(t) => Some(t),
            Err(e) => {
                if let WeightError::ShapeMismatch { name, .. } = &e {
                    // Reported here; not again as an unused tensor.
                    self.file.mark_used(name.clone());
                }
                self.problems.push(e.to_string());
                None
            }
        }
    }

    /// A weight-normalised convolution weight of shape `shape` (normalised over dims 1, 2).
    fn folded_weight(&mut self, name: &str, shape: [usize; 3]) -> Option<Tensor<3>> {
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
        match found {
            Some((g, v)) => {
                let g: Tensor<3> = self.read(&format!("{name}.{g}"), [shape[0], 1, 1])?;
                let v: Tensor<3> = self.read(&format!("{name}.{v}"), shape)?;
                let norm = v.clone().square().sum_dim(1).sum_dim(2).sqrt(); // [d0, 1, 1]
                Some(v * (g / norm))
            }
            None => self.read(&format!("{name}.weight"), shape),
        }
    }

    fn bias(&mut self, bias: &mut Option<Param<Tensor<1>>>, name: &str) {
        if let Some(b) = bias {
            let [n] = b.shape().dims();
            if let Some(t) = self.read(&format!("{name}.bias"), [n]) {
                *b = Param::from_tensor(t);
            }
        }
    }

    fn conv(&mut self, conv: &mut Conv1d, name: &str) {
        let shape: [usize; 3] = conv.weight.shape().dims();
        if let Some(w) = self.folded_weight(name, shape) {
            conv.weight = Param::from_tensor(w);
        }
        self.bias(&mut conv.bias, name);
    }

    fn conv_transpose(&mut self, conv: &mut ConvTranspose1d, name: &str) {
        let shape: [usize; 3] = conv.weight.shape().dims();
        if let Some(w) = self.folded_weight(name, shape) {
            conv.weight = Param::from_tensor(w);
        }
        self.bias(&mut conv.bias, name);
    }

    fn linear(&mut self, linear: &mut Linear, name: &str) {
        let [d_in, d_out] = linear.weight.shape().dims();
        if let Some(w) = self.read::<2>(&format!("{name}.weight"), [d_out, d_in]) {
            linear.weight = Param::from_tensor(w.transpose());
        }
        self.bias(&mut linear.bias, name);
    }

    fn res_block(&mut self, block: &mut ResnetBlock, name: &str) {
        self.conv(&mut block.conv1.conv, &format!("{name}.block.1.conv.conv"));
        self.conv(&mut block.conv2.conv, &format!("{name}.block.3.conv.conv"));
        self.conv(
            &mut block.shortcut.conv,
            &format!("{name}.shortcut.conv.conv"),
        );
    }

    fn lstm_direction(&mut self, dir: &mut LstmDirection, name: &str, suffix: &str) {
        let [d_in, four_h] = dir.weight_ih.shape().dims();
        let h = four_h / 4;
        if let Some(w) = self.read::<2>(&format!("{name}.weight_ih_{suffix}"), [four_h, d_in]) {
            dir.weight_ih = Param::from_tensor(w.transpose());
        }
        if let Some(w) = self.read::<2>(&format!("{name}.weight_hh_{suffix}"), [four_h, h]) {
            dir.weight_hh = Param::from_tensor(w.transpose());
        }
        if let Some(b) = self.read(&format!("{name}.bias_ih_{suffix}"), [four_h]) {
            dir.bias_ih = Param::from_tensor(b);
        }
        if let Some(b) = self.read(&format!("{name}.bias_hh_{suffix}"), [four_h]) {
            dir.bias_hh = Param::from_tensor(b);
        }
    }

    fn lstm(&mut self, lstm: &mut SLstm, name: &str) {
        for (k, layer) in lstm.layers.iter_mut().enumerate() {
            self.lstm_direction(&mut layer.forward, name, &format!("l{k}"));
            if let Some(rev) = &mut layer.reverse {
                self.lstm_direction(rev, name, &format!("l{k}_reverse"));
            }
        }
    }

    fn codebook(&mut self, cb: &mut EuclideanCodebook, name: &str) {
        let (k, d) = (cb.codebook_size(), cb.dim());
        if let Some(t) = self.read(&format!("{name}.embed"), [k, d]) {
            cb.embed = replace_buffer(&cb.embed, t);
        }
        if let Some(t) = self.read(&format!("{name}.embed_avg"), [k, d]) {
            cb.embed_avg = replace_buffer(&cb.embed_avg, t);
        }
        if let Some(t) = self.read(&format!("{name}.cluster_size"), [k]) {
            cb.cluster_size = replace_buffer(&cb.cluster_size, t);
        }
        if let Some(t) = self.read(&format!("{name}.inited"), [1]) {
            cb.inited = replace_buffer(&cb.inited, t);
        }
    }

    /// Assigns every parameter of `model` (indices follow the package's `nn.Sequential`s).
    fn assign(&mut self, model: &mut SpeechTokenizer) {
        let enc = &mut model.encoder;
        self.conv(&mut enc.first.conv, "encoder.model.0.conv.conv");
        let mut i = 1;
        for stage in &mut enc.stages {
            for block in &mut stage.res {
                self.res_block(block, &format!("encoder.model.{i}"));
                i += 1;
            }
            // ELU at i, strided convolution at i + 1.
            self.conv(
                &mut stage.down.conv,
                &format!("encoder.model.{}.conv.conv", i + 1),
            );
            i += 2;
        }
        if let Some(lstm) = &mut enc.lstm {
            self.lstm(lstm, &format!("encoder.model.{i}.lstm"));
            i += 1;
        }
        self.conv(
            &mut enc.last.conv,
            &format!("encoder.model.{}.conv.conv", i + 1),
        );

        if let Some(t) = &mut model.transform {
            self.linear(t, "transform");
        }
        for (l, layer) in model.quantizer.layers.iter_mut().enumerate() {
            self.codebook(
                &mut layer.codebook,
                &format!("quantizer.vq.layers.{l}._codebook"),
            );
        }

        let dec = &mut model.decoder;
        self.conv(&mut dec.first.conv, "decoder.model.0.conv.conv");
        let mut i = 1;
        if let Some(lstm) = &mut dec.lstm {
            self.lstm(lstm, "decoder.model.1.lstm");
            i += 1;
        }
        for stage in &mut dec.stages {
            // ELU at i, transposed convolution at i + 1, residual blocks after.
            self.conv_transpose(
                &mut stage.up.convtr,
                &format!("decoder.model.{}.convtr.convtr", i + 1),
            );
            i += 2;
            for block in &mut stage.res {
                self.res_block(block, &format!("decoder.model.{i}"));
                i += 1;
            }
        }
        self.conv(
            &mut dec.last.conv,
            &format!("decoder.model.{}.conv.conv", i + 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_config_defaults_are_the_base_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(&path, r#"{"n_q": 4}"#).unwrap();
        let config = SpeechTokenizerConfig::from_package_json(&path).unwrap();
        assert_eq!(config.n_q, 4);
        assert_eq!(config.hop_length(), 320);
        assert_eq!(config.seanet.dimension, 1024);
        std::fs::write(&path, r#"{"activation": "Snake"}"#).unwrap();
        let err = SpeechTokenizerConfig::from_package_json(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("activation"), "{err}");
    }
}
