//! SpeechTokenizer (Zhang et al. 2024, "SpeechTokenizer: Unified Speech Tokenizer for Speech
//! Large Language Models", arXiv:2308.16692): a SEANet convolutional codec with a BiLSTM
//! encoder and a residual vector quantizer whose first layer is distilled from a semantic
//! teacher (HuBERT, or here also a CTC model), so RVQ-1 carries content and RVQ-2..8 the
//! acoustic detail.
//!
//! ```text
//! wave [B, 1, S] ─ SEANet encoder ─ latents [B, D, T] ─ RVQ (n_q × K) ─ quantized [B, D, T]
//!                                                         │ codes [n_q, B, T]
//!                                  RVQ-1 output ─ transpose ─ Linear(D → semantic_dim)
//!                                                         = semantic [B, T, semantic_dim]
//! quantized ─ SEANet decoder ─ wave [B, 1, T·hop]
//! ```
//!
//! The module layout mirrors the `speechtokenizer` package, so its checkpoints load one to one
//! ([`SpeechTokenizer::load`]; key table in `loader.rs`).

mod discriminators;
mod files;
mod layers;
mod loader;
pub mod prepare;
pub mod run;
mod seanet;
mod stream;
pub mod train;

pub use discriminators::{
    DiscriminatorOutput, Discriminators, DiscriminatorsConfig, PeriodDiscriminator,
    ScaleDiscriminator,
};
pub use files::{CODEC_KIND, load_codec, read_codec_config, save_codec};
pub use layers::{
    INIT_GAIN, LstmDirection, LstmLayer, LstmState, SConv1d, SConv1dConfig, SConvTranspose1d,
    SConvTranspose1dConfig, SLstm, SLstmConfig, elu,
};
pub use loader::{CONFIG_FILE, KEY_MAP, WEIGHTS_FILE};
pub use seanet::{
    DecoderStage, EncoderStage, ResnetBlock, SeanetConfig, SeanetDecoder, SeanetEncoder,
};
pub use stream::DecodeStream;

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::CodecError;
use crate::quant::{
    CodebookUpdate, EuclideanCodebookConfig, QuantizerOutput, ResidualVectorQuantizer,
    ResidualVectorQuantizerConfig, SplitMix64, VectorQuantizerConfig,
};

/// Configuration of a [`SpeechTokenizer`]. Field names and defaults follow the package's
/// `config/spt_base_cfg.json`, plus the codebook training settings.
#[derive(Config, Debug)]
pub struct SpeechTokenizerConfig {
    /// Sample rate of the waveforms (Hz).
    #[config(default = 16000)]
    pub sample_rate: u32,
    /// Encoder/decoder shape.
    #[config(default = "SeanetConfig::new()")]
    pub seanet: SeanetConfig,
    /// Dimension of the semantic teacher's features (the RVQ-1 projection's output).
    #[config(default = 768)]
    pub semantic_dimension: usize,
    /// RVQ layers `n_q`.
    #[config(default = 8)]
    pub n_q: usize,
    /// Codes per RVQ layer.
    #[config(default = 1024)]
    pub codebook_size: usize,
    /// EMA decay of the codebooks.
    #[config(default = 0.99)]
    pub ema_decay: f64,
    /// Lloyd iterations of the k-means initialisation of each codebook.
    #[config(default = 50)]
    pub kmeans_iters: usize,
    /// EMA cluster size below which a code is restarted.
    #[config(default = 2.0)]
    pub dead_code_threshold: f64,
    /// Cap on the dead-code threshold as a fraction of a batch's uniform share `n / K` (see
    /// [`crate::quant::EuclideanCodebookConfig::dead_code_share`]). `None`, which is what a
    /// config.json written before this field existed reads as, keeps the absolute threshold
    /// alone, as those codecs were trained.
    #[config(default = "Some(0.1)")]
    pub dead_code_share: Option<f64>,
}

impl SpeechTokenizerConfig {
    /// The codec of `preset`'s size: [`tiny`](Self::tiny), [`small`](Self::small), or the
    /// published SpeechTokenizer ([`speechtokenizer_base`](Self::speechtokenizer_base)).
    pub fn preset(preset: voxspec_nn::Preset) -> Self {
        match preset {
            voxspec_nn::Preset::Tiny => Self::tiny(),
            voxspec_nn::Preset::Small => Self::small(),
            voxspec_nn::Preset::Base => Self::speechtokenizer_base(),
        }
    }

    /// For tests and smoke runs: base width 4, latent 16, one LSTM layer, 4 × 32 codes, hop
    /// 320, 2 k-means iterations.
    pub fn tiny() -> Self {
        Self::new()
            .with_seanet(
                SeanetConfig::new()
                    .with_n_filters(4)
                    .with_dimension(16)
                    .with_lstm_layers(1),
            )
            .with_n_q(4)
            .with_codebook_size(32)
            .with_kmeans_iters(2)
    }

    /// The published SpeechTokenizer: 16 kHz, hop 320 (50 Hz), 8 × 1024 codes, latent 1024,
    /// HuBERT-base teacher (768).
    pub fn speechtokenizer_base() -> Self {
        Self::new()
    }

    /// A small codec for the bundled corpus on a CPU: base width 16, latent 128, one LSTM
    /// layer, 8 × 256 codes, same strides (50 Hz at 16 kHz), EMA decay 0.95.
    ///
    /// The faster decay suits small batches (4 × 1 s = 200 vectors per update): the EMA
    /// averages over about 20 updates instead of 100, so the codes follow the encoder while it
    /// moves early in training and a code that stops winning is restarted after about 45
    /// updates instead of 230; at decay 0.99 a trial run's RVQ-1 used 1–5 codes per batch of
    /// 200 frames from step 20 to step 110, where it was stopped.
    pub fn small() -> Self {
        Self::new()
            .with_seanet(
                SeanetConfig::new()
                    .with_n_filters(16)
                    .with_dimension(128)
                    .with_lstm_layers(1),
            )
            .with_codebook_size(256)
            .with_kmeans_iters(10)
            .with_ema_decay(0.95)
    }

    /// Samples per frame.
    pub fn hop_length(&self) -> usize {
        self.seanet.hop_length()
    }

    /// Frames per second.
    pub fn frame_rate(&self) -> f32 {
        self.sample_rate as f32 / self.hop_length().max(1) as f32
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`CodecError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), CodecError> {
        let bad = |field, reason: String| Err(CodecError::InvalidConfig { field, reason });
        let s = &self.seanet;
        if s.strides.is_empty() || s.strides.contains(&0) {
            return bad(
                "strides",
                format!("must be non-empty and positive, got {:?}", s.strides),
            );
        }
        if s.n_filters == 0 || s.dimension == 0 || s.compress == 0 || s.kernel_size == 0 {
            return bad(
                "n_filters",
                "n_filters, dimension, compress and kernel_size must be positive".into(),
            );
        }
        if s.n_filters / s.compress == 0 {
            return bad(
                "n_filters",
                format!("{} / compress {} is 0", s.n_filters, s.compress),
            );
        }
        if self.n_q == 0 || self.codebook_size == 0 {
            return bad("n_q", "n_q and codebook_size must be positive".into());
        }
        if self.semantic_dimension == 0 {
            return bad("semantic_dimension", "must be positive".into());
        }
        Ok(())
    }

    /// The quantizer this config describes.
    pub fn quantizer(&self) -> ResidualVectorQuantizerConfig {
        ResidualVectorQuantizerConfig::new()
            .with_n_q(self.n_q)
            .with_layer(
                VectorQuantizerConfig::new()
                    .with_dim(self.seanet.dimension)
                    .with_codebook(
                        EuclideanCodebookConfig::new()
                            .with_dim(self.seanet.dimension)
                            .with_codebook_size(self.codebook_size)
                            .with_decay(self.ema_decay)
                            .with_kmeans_iters(self.kmeans_iters)
                            .with_threshold_ema_dead_code(self.dead_code_threshold)
                            .with_dead_code_share(self.dead_code_share.unwrap_or(0.0)),
                    ),
            )
    }

    /// Builds a randomly initialised model (codebooks await k-means on the first batch).
    ///
    /// # Errors
    /// When the config is inconsistent (see [`SpeechTokenizerConfig::validate`]).
    pub fn init(&self, device: &Device) -> Result<SpeechTokenizer, CodecError> {
        self.validate()?;
        let d = self.seanet.dimension;
        Ok(SpeechTokenizer {
            encoder: self.seanet.init_encoder(device),
            transform: (d != self.semantic_dimension)
                .then(|| LinearConfig::new(d, self.semantic_dimension).init(device)),
            quantizer: self.quantizer().init(device),
            decoder: self.seanet.init_decoder(device),
            hop: self.hop_length(),
        })
    }
}

/// What [`SpeechTokenizer::forward`] returns.
#[derive(Debug, Clone)]
pub struct CodecOutput {
    /// Reconstructed waveform `[batch, 1, frames · hop]`.
    pub audio: Tensor<3>,
    /// The quantizer's output (codes, commitment loss, per-layer outputs, metrics).
    pub quant: QuantizerOutput,
    /// RVQ-1 output projected to the teacher's dimension `[batch, frames, semantic_dim]`.
    pub semantic: Tensor<3>,
}

/// The SpeechTokenizer codec (see the module documentation).
#[derive(Module, Debug)]
pub struct SpeechTokenizer {
    /// SEANet encoder with the BiLSTM.
    pub encoder: SeanetEncoder,
    /// RVQ-1 → teacher projection (absent when the dimensions agree).
    pub transform: Option<Linear>,
    /// The residual vector quantizer.
    pub quantizer: ResidualVectorQuantizer,
    /// SEANet decoder.
    pub decoder: SeanetDecoder,
    #[module(skip)]
    hop: usize,
}

impl SpeechTokenizer {
    /// Samples per frame.
    pub fn hop_length(&self) -> usize {
        self.hop
    }

    /// Number of RVQ layers.
    pub fn n_q(&self) -> usize {
        self.quantizer.n_q()
    }

    /// Frames produced for `samples` input samples.
    pub fn num_frames(&self, samples: usize) -> usize {
        samples.div_ceil(self.hop.max(1))
    }

    fn check_wave(&self, wave: &Tensor<3>) -> Result<(), CodecError> {
        let dims = wave.dims();
        if dims[1] != 1 || dims[2] == 0 {
            return Err(CodecError::QuantizerShape {
                what: "codec input waveform [batch, 1, samples]",
                expected: vec![dims[0], 1, dims[2].max(1)],
                found: dims.to_vec(),
            });
        }
        Ok(())
    }

    /// The encoder's continuous latents.
    ///
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`
    /// - returns: `[batch, dimension, ceil(samples / hop)]`
    ///
    /// # Errors
    /// When `wave` is not `[batch, 1, samples > 0]`.
    pub fn latents(&self, wave: Tensor<3>) -> Result<Tensor<3>, CodecError> {
        self.check_wave(&wave)?;
        Ok(self.encoder.forward(wave))
    }

    /// Encode, quantize with the first `n_q` layers, decode, and project RVQ-1 to the
    /// teacher's space.
    ///
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`
    /// - returns: [`CodecOutput`]: `audio` `[batch, 1, frames · hop]`, `quant.codes`
    ///   `[n_q, batch, frames]`, `semantic` `[batch, frames, semantic_dim]`
    ///
    /// # Errors
    /// On a bad input shape or `n_q`.
    pub fn forward(&self, wave: Tensor<3>, n_q: usize) -> Result<CodecOutput, CodecError> {
        let latents = self.latents(wave)?;
        let quant = self.quantizer.forward(latents, n_q)?;
        let first = quant
            .layer_quantized
            .first()
            .cloned()
            .unwrap_or_else(|| quant.quantized.clone())
            .swap_dims(1, 2); // [batch, frames, dimension]
        let semantic = match &self.transform {
            Some(t) => t.forward(first),
            None => first,
        };
        let audio = self.decoder.forward(quant.quantized.clone());
        Ok(CodecOutput {
            audio,
            quant,
            semantic,
        })
    }

    /// Codes of the first `n_q` RVQ layers.
    ///
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`
    /// - returns: `[n_q, batch, ceil(samples / hop)]`
    ///
    /// # Errors
    /// On a bad input shape or `n_q`.
    pub fn encode(&self, wave: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError> {
        let latents = self.latents(wave)?;
        self.quantizer.encode(latents, n_q)
    }

    /// Waveform from the codes of the first `m` layers.
    ///
    /// # Shapes
    /// - `codes`: `[m, batch, frames]`, `1 ≤ m ≤ n_q`
    /// - returns: `[batch, 1, frames · hop]`
    ///
    /// # Errors
    /// When `m` is 0 or exceeds the layers.
    pub fn decode(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, CodecError> {
        Ok(self.decoder.forward(self.quantizer.decode(codes)?))
    }

    /// Encodes `samples` (mono, at the codec's rate) with every quantizer and decodes the codes
    /// back once per entry of `layers`, with that many layers (1: RVQ-1's code vectors alone);
    /// every output is trimmed to the input length.
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] for empty `samples`; [`CodecError::QuantizerLayers`] for a
    /// layer count of 0 or above [`SpeechTokenizer::n_q`]; [`CodecError::TensorRead`].
    pub fn resynthesize(
        &self,
        samples: &[f32],
        layers: &[usize],
        device: &Device,
    ) -> Result<Vec<Vec<f32>>, CodecError> {
        let n = samples.len();
        if n == 0 {
            return Err(CodecError::QuantizerShape {
                what: "waveform to resynthesize [samples]",
                expected: vec![1],
                found: vec![0],
            });
        }
        let wave = Tensor::from_data(TensorData::new(samples.to_vec(), [1, 1, n]), device);
        let codes = self.encode(wave, self.n_q())?; // [n_q, 1, frames]
        layers
            .iter()
            .map(|&m| {
                if m == 0 || m > self.n_q() {
                    return Err(CodecError::QuantizerLayers {
                        start: 0,
                        count: m,
                        available: self.n_q(),
                    });
                }
                let mut out = self
                    .decode(codes.clone().narrow(0, 0, m))? // [1, 1, frames · hop]
                    .into_data()
                    .try_into_vec_as::<f32>()
                    .map_err(|e| CodecError::TensorRead {
                        what: "the resynthesized waveform",
                        reason: format!("{e:?}"),
                    })?;
                out.truncate(n);
                Ok(out)
            })
            .collect()
    }

    /// One EMA update of every codebook on the latents of `wave` (see
    /// [`crate::quant::EuclideanCodebook::ema_update`]); the encoder runs without autodiff.
    ///
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`
    ///
    /// # Errors
    /// On a bad input shape or a failed read-back.
    pub fn ema_update(
        mut self,
        wave: Tensor<3>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, Vec<CodebookUpdate>), CodecError> {
        let inner = self.encoder.valid();
        self.check_wave(&wave)?;
        let latents = inner.forward(wave.without_autodiff());
        let (quantizer, reports) = self.quantizer.ema_update(latents, rng)?;
        self.quantizer = quantizer;
        Ok((self, reports))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> SpeechTokenizerConfig {
        SpeechTokenizerConfig::new()
            .with_seanet(
                SeanetConfig::new()
                    .with_n_filters(4)
                    .with_dimension(8)
                    .with_strides(vec![4, 2])
                    .with_lstm_layers(1),
            )
            .with_semantic_dimension(6)
            .with_n_q(3)
            .with_codebook_size(16)
    }

    #[test]
    fn shapes_follow_the_hop() {
        let device = Device::flex();
        let model = tiny().init(&device).unwrap();
        assert_eq!(model.hop_length(), 8);
        let wave: Tensor<3> = Tensor::random(
            [2, 1, 61],
            burn::tensor::Distribution::Normal(0.0, 0.1),
            &device,
        );
        let out = model.forward(wave.clone(), 3).unwrap();
        assert_eq!(out.audio.dims(), [2, 1, 64]);
        assert_eq!(out.quant.codes.dims(), [3, 2, 8]);
        assert_eq!(out.semantic.dims(), [2, 8, 6]);
        assert_eq!(model.encode(wave, 2).unwrap().dims(), [2, 2, 8]);
    }

    #[test]
    fn configs_without_the_dead_code_share_keep_the_absolute_threshold() {
        let mut value: serde_json::Value = serde_json::from_str(&tiny().to_string()).unwrap();
        let fields = value.as_object_mut().unwrap();
        assert_eq!(fields["dead_code_share"], serde_json::json!(0.1));
        fields.remove("dead_code_share");
        let old: SpeechTokenizerConfig = serde_json::from_value(value).unwrap();
        assert_eq!(old.dead_code_share, None);
        assert_eq!(old.quantizer().layer.codebook.dead_code_share, 0.0);
        assert_eq!(tiny().quantizer().layer.codebook.dead_code_share, 0.1);
    }

    #[test]
    fn resynthesis_decodes_each_layer_count_at_the_input_length() {
        let device = Device::flex();
        let model = tiny().init(&device).unwrap();
        let samples: Vec<f32> = (0..61).map(|i| (i as f32 * 0.3).sin() * 0.1).collect();
        let outs = model.resynthesize(&samples, &[3, 1], &device).unwrap();
        assert_eq!(outs.iter().map(Vec::len).collect::<Vec<_>>(), [61, 61]);
        // The same as decoding the codes by hand.
        let wave = Tensor::from_data(TensorData::new(samples.clone(), [1, 1, 61]), &device);
        let codes = model.encode(wave, 3).unwrap().narrow(0, 0, 1);
        let by_hand = model
            .decode(codes)
            .unwrap()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        assert_eq!(outs[1], by_hand[..61]);
        for bad in [0, 4] {
            assert!(matches!(
                model.resynthesize(&samples, &[bad], &device),
                Err(CodecError::QuantizerLayers { .. })
            ));
        }
        assert!(model.resynthesize(&[], &[1], &device).is_err());
    }

    #[test]
    fn bad_inputs_are_errors() {
        let device = Device::flex();
        let model = tiny().init(&device).unwrap();
        let stereo: Tensor<3> = Tensor::zeros([1, 2, 64], &device);
        assert!(model.encode(stereo, 1).is_err());
        let mono: Tensor<3> = Tensor::zeros([1, 1, 64], &device);
        assert!(model.encode(mono, 4).is_err());
        assert!(tiny().with_n_q(0).init(&device).is_err());
    }
}
