//! A trained CTC model ready for use: front end + model + character vocabulary, loaded from
//! (and saved to) a directory, as a [`SemanticTeacher`] and as a transcriber for CER scoring.
//!
//! ```text
//! <dir>/
//!   config.json        {"kind": "ctc", "voxspec_version", "model": CtcModelConfig,
//!                       "frontend": FrontendConfig, "feature_layer": L}
//!   model.safetensors  weights under their module paths (conv_in.weight, encoder.blocks.0…)
//!   tokenizer.json     the character vocabulary (Hugging Face format, normaliser inside);
//!                      id 0 (`<pad>`) is the CTC blank, id 1 (`<unk>`) unknown characters
//! ```

use std::path::{Path, PathBuf};

use burn::store::{ModuleSnapshot, SafetensorsStore};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use voxspec_data::TextTokenizer;
use voxspec_nn::weights::{WeightError, read_json};

use super::cer::ErrorCounts;
use super::decode::greedy_decode;
use super::forced_choice::{ClipVerdict, ForcedChoice, LogProbs};
use super::frontend::{Frontend, FrontendConfig};
use super::host_f32;
use super::model::{BLANK, CtcModel, CtcModelConfig};
use crate::error::TeacherError;
use crate::teacher::{LayerSelection, SemanticTeacher};

/// `kind` written in a CTC teacher's `config.json`.
pub const CTC_KIND: &str = "ctc";
/// Config file name inside a teacher directory.
pub const CONFIG_FILE: &str = "config.json";
/// Weight file name inside a teacher directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// Vocabulary file name inside a teacher directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// The contents of a CTC teacher's `config.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtcTeacherFile {
    /// Always [`CTC_KIND`].
    pub kind: String,
    /// Version of voxspec that wrote the directory.
    pub voxspec_version: String,
    /// The model.
    pub model: CtcModelConfig,
    /// The front end.
    pub frontend: FrontendConfig,
    /// Default hidden state used as features (0..=n_layers).
    pub feature_layer: usize,
}

/// A trained CTC model with its front end and vocabulary.
#[derive(Debug, Clone)]
pub struct CtcTeacher {
    config: CtcModelConfig,
    model: CtcModel,
    frontend: Frontend,
    tokenizer: TextTokenizer,
    layer: LayerSelection,
    device: Device,
}

impl CtcTeacher {
    /// Wraps a model; `layer` picks the features of [`SemanticTeacher::features`].
    ///
    /// # Errors
    /// [`TeacherError::InvalidConfig`] when the vocabulary size differs from the model's, and
    /// [`TeacherError::LayerOutOfRange`] for a layer above `n_layers`.
    pub fn new(
        config: CtcModelConfig,
        model: CtcModel,
        frontend: FrontendConfig,
        tokenizer: TextTokenizer,
        layer: LayerSelection,
    ) -> Result<Self, TeacherError> {
        if tokenizer.vocab_size() != model.vocab_size() {
            return Err(TeacherError::InvalidConfig {
                field: "vocab_size",
                reason: format!(
                    "the tokenizer has {} tokens but the model {} classes",
                    tokenizer.vocab_size(),
                    model.vocab_size()
                ),
            });
        }
        if frontend.n_mels != config.n_mels {
            return Err(TeacherError::InvalidConfig {
                field: "n_mels",
                reason: format!(
                    "the front end gives {} bands but the model reads {}",
                    frontend.n_mels, config.n_mels
                ),
            });
        }
        let device = model.head.weight.val().device();
        let teacher = Self {
            config,
            model,
            frontend: frontend.init()?,
            tokenizer,
            layer: LayerSelection::MeanOfAll,
            device,
        };
        teacher.with_layer(layer)
    }

    /// The same teacher with another feature layer.
    ///
    /// # Errors
    /// [`TeacherError::LayerOutOfRange`] for an index above `n_layers`.
    pub fn with_layer(mut self, layer: LayerSelection) -> Result<Self, TeacherError> {
        let available = self.model.n_layers() + 1;
        if let LayerSelection::Index(i) = layer
            && i >= available
        {
            return Err(TeacherError::LayerOutOfRange {
                layer: i,
                available,
            });
        }
        self.layer = layer;
        Ok(self)
    }

    /// Loads `<dir>/{config.json, model.safetensors, tokenizer.json}` onto `device`, with the
    /// feature layer saved in the config.
    ///
    /// # Errors
    /// Missing or malformed files (named), a config of another kind, weights that do not fit.
    pub fn load(dir: impl AsRef<Path>, device: &Device) -> Result<Self, TeacherError> {
        let dir = dir.as_ref();
        let file = read_teacher_file(dir)?;
        let mut model = file.model.init(device)?;
        let weights = dir.join(WEIGHTS_FILE);
        if !weights.is_file() {
            return Err(WeightError::Io {
                path: weights,
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }
            .into());
        }
        let mut store = SafetensorsStore::from_file(&weights);
        let applied = model
            .load_from(&mut store)
            .map_err(|e| WeightError::Safetensors {
                path: weights.clone(),
                reason: e.to_string(),
            })?;
        if !applied.errors.is_empty() || !applied.missing.is_empty() {
            return Err(WeightError::Safetensors {
                path: weights,
                reason: applied.to_string(),
            }
            .into());
        }
        let tokenizer = TextTokenizer::load(&dir.join(TOKENIZER_FILE))?;
        Self::new(
            file.model,
            model,
            file.frontend,
            tokenizer,
            LayerSelection::Index(file.feature_layer),
        )
    }

    /// Writes the teacher into `dir` (created if needed); the weights are written to a
    /// temporary file first and renamed into place.
    ///
    /// # Errors
    /// [`WeightError::Io`] or [`WeightError::Safetensors`] naming the file.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<(), TeacherError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| WeightError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let feature_layer = match self.layer {
            LayerSelection::Index(i) => i,
            LayerSelection::MeanOfAll => self.model.n_layers(),
        };
        let file = CtcTeacherFile {
            kind: CTC_KIND.into(),
            voxspec_version: env!("CARGO_PKG_VERSION").into(),
            model: self.config.clone(),
            frontend: self.frontend.config().clone(),
            feature_layer,
        };
        let config_path = dir.join(CONFIG_FILE);
        let json =
            serde_json::to_string_pretty(&file).map_err(|source| WeightError::ConfigParse {
                path: config_path.clone(),
                source,
            })?;
        voxspec_data::write_atomic(&config_path, json.as_bytes())?;
        self.tokenizer.save(&dir.join(TOKENIZER_FILE))?;
        let weights = dir.join(WEIGHTS_FILE);
        voxspec_train::save_weights(&self.model, &weights).map_err(|e| {
            WeightError::Safetensors {
                path: weights.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(())
    }

    /// The model.
    pub fn model(&self) -> &CtcModel {
        &self.model
    }

    /// The model config.
    pub fn model_config(&self) -> &CtcModelConfig {
        &self.config
    }

    /// The front end.
    pub fn frontend(&self) -> &Frontend {
        &self.frontend
    }

    /// The character vocabulary.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The feature layer.
    pub fn layer(&self) -> LayerSelection {
        self.layer
    }

    /// Text as the teacher writes it (the tokenizer's normalisation): compare transcripts
    /// with references normalised this way.
    ///
    /// # Errors
    /// [`TeacherError::Data`] if the normaliser fails.
    pub fn normalize(&self, text: &str) -> Result<String, TeacherError> {
        Ok(self.tokenizer.normalize(text)?)
    }

    /// Padded front-end features of several waveforms on the teacher's device.
    ///
    /// # Shapes
    /// `waves`: `batch` slices → `[batch, frames, n_mels]` and the valid frames of each.
    fn batch_features(&self, waves: &[&[f32]]) -> Result<(Tensor<3>, Vec<usize>), TeacherError> {
        let min = 1;
        let feats: Vec<Vec<f32>> = waves
            .iter()
            .map(|w| {
                if w.len() < min {
                    Err(TeacherError::WaveTooShort {
                        samples: w.len(),
                        min,
                    })
                } else {
                    Ok(self.frontend.features(w))
                }
            })
            .collect::<Result<_, _>>()?;
        let n_mels = self.frontend.n_mels();
        let lengths: Vec<usize> = feats.iter().map(|f| f.len() / n_mels).collect();
        let frames = lengths.iter().copied().max().unwrap_or(0);
        let mut data = vec![0.0f32; waves.len() * frames * n_mels];
        for (b, f) in feats.iter().enumerate() {
            data[b * frames * n_mels..b * frames * n_mels + f.len()].copy_from_slice(f);
        }
        let x = Tensor::<3>::from_data(
            TensorData::new(data, [waves.len(), frames, n_mels]),
            &self.device,
        );
        Ok((x, lengths))
    }

    /// Greedy transcripts of several waveforms (at [`SemanticTeacher::sample_rate`]), batched.
    ///
    /// # Errors
    /// [`TeacherError::WaveTooShort`] for an empty waveform, and model
    /// errors (e.g. audio longer than `max_seq_len` frames).
    pub fn transcribe_batch(&self, waves: &[&[f32]]) -> Result<Vec<String>, TeacherError> {
        if waves.is_empty() {
            return Ok(Vec::new());
        }
        let (x, lengths) = self.batch_features(waves)?;
        let out = self.model.forward(x, &lengths)?;
        let ids = greedy_decode(out.logits, &out.lengths, BLANK)?;
        ids.iter()
            .map(|ids| Ok(self.tokenizer.decode(ids)?))
            .collect()
    }

    /// Greedy transcript of one waveform.
    ///
    /// # Errors
    /// As [`CtcTeacher::transcribe_batch`].
    pub fn transcribe(&self, wave: &[f32]) -> Result<String, TeacherError> {
        Ok(self
            .transcribe_batch(&[wave])?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Transcribes `wave` and counts its character errors against `reference` (normalised
    /// first). Returns the transcript and the counts.
    ///
    /// # Errors
    /// As [`CtcTeacher::transcribe`].
    pub fn score(
        &self,
        wave: &[f32],
        reference: &str,
    ) -> Result<(String, ErrorCounts), TeacherError> {
        let hyp = self.transcribe(wave)?;
        let counts = ErrorCounts::between(&hyp, &self.normalize(reference)?);
        Ok((hyp, counts))
    }

    /// Frame log-probabilities of several waveforms (one batched forward), read back to the
    /// host and cut to each waveform's valid frames.
    ///
    /// # Shapes
    /// `waves`: `batch` slices → `batch` × `[frames_b, vocab]` at 50 Hz.
    ///
    /// # Errors
    /// As [`CtcTeacher::transcribe_batch`]; [`TeacherError::TensorRead`] if the values cannot be
    /// read back.
    pub fn log_probs_batch(&self, waves: &[&[f32]]) -> Result<Vec<LogProbs>, TeacherError> {
        if waves.is_empty() {
            return Ok(Vec::new());
        }
        let (x, lengths) = self.batch_features(waves)?;
        let out = self.model.forward(x, &lengths)?;
        let [_, frames, classes] = out.logits.dims();
        // [batch, frames, classes], padded rows included
        let host = host_f32(log_softmax(out.logits, 2).into_data(), "ctc log-probs")?;
        out.lengths
            .iter()
            .enumerate()
            .map(|(b, &len)| {
                let start = b * frames * classes;
                LogProbs::new(len, classes, host[start..start + len * classes].to_vec())
            })
            .collect()
    }

    /// Forced-choice identification of several clips (see [`super::forced_choice`]): one
    /// batched teacher forward, then a CTC forward per candidate and clip. `own[b]` is the
    /// index in `set` of clip `b`'s own transcript.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] when `own` and `waves` differ in length or an index is not
    /// a candidate; as [`CtcTeacher::log_probs_batch`].
    pub fn forced_choice(
        &self,
        set: &ForcedChoice,
        waves: &[&[f32]],
        own: &[usize],
    ) -> Result<Vec<ClipVerdict>, TeacherError> {
        if own.len() != waves.len() {
            return Err(TeacherError::InvalidInput {
                what: "forced-choice clips",
                reason: format!(
                    "{} waveforms but {} own transcripts",
                    waves.len(),
                    own.len()
                ),
            });
        }
        self.log_probs_batch(waves)?
            .iter()
            .zip(own)
            .map(|(lp, &own)| set.judge(&self.tokenizer, lp, own))
            .collect()
    }

    /// Frame log-probabilities of one waveform.
    ///
    /// # Shapes
    /// `wave: [samples]` → `[frames, vocab]` at 50 Hz.
    ///
    /// # Errors
    /// As [`CtcTeacher::transcribe`].
    pub fn log_probs(&self, wave: &[f32]) -> Result<Tensor<2>, TeacherError> {
        let (x, lengths) = self.batch_features(&[wave])?;
        let out = self.model.forward(x, &lengths)?;
        Ok(log_softmax(out.logits, 2).squeeze_dim::<2>(0))
    }

    /// Features of several waveforms at the teacher's layer, batched; one `[frames, dim]`
    /// tensor per waveform.
    ///
    /// # Errors
    /// As [`SemanticTeacher::features`].
    pub fn features_batch(&self, waves: &[&[f32]]) -> Result<Vec<Tensor<2>>, TeacherError> {
        if waves.is_empty() {
            return Ok(Vec::new());
        }
        let (x, lengths) = self.batch_features(waves)?;
        let (hidden, out_lengths) = match self.layer {
            LayerSelection::Index(i) => self.model.hidden(x, &lengths, i)?,
            LayerSelection::MeanOfAll => {
                let n = self.model.n_layers();
                let (mut sum, out_lengths) = self.model.hidden(x.clone(), &lengths, 0)?;
                for i in 1..=n {
                    sum = sum + self.model.hidden(x.clone(), &lengths, i)?.0;
                }
                (sum.div_scalar((n + 1) as f64), out_lengths)
            }
        };
        let dim = self.model.d_model();
        Ok(out_lengths
            .iter()
            .enumerate()
            .map(|(b, &len)| {
                // [1, len, dim] → [len, dim]
                hidden
                    .clone()
                    .slice([b..b + 1, 0..len, 0..dim])
                    .squeeze_dim::<2>(0)
            })
            .collect())
    }
}

impl SemanticTeacher for CtcTeacher {
    fn sample_rate(&self) -> u32 {
        self.frontend.config().sample_rate
    }

    fn frame_rate(&self) -> f32 {
        let c = self.frontend.config();
        c.sample_rate as f32 / (2 * c.hop_length) as f32
    }

    fn dim(&self) -> usize {
        self.model.d_model()
    }

    fn num_frames(&self, samples: usize) -> usize {
        self.model.output_frames(self.frontend.num_frames(samples))
    }

    fn features(&self, wave: &[f32]) -> Result<Tensor<2>, TeacherError> {
        self.features_batch(&[wave])?
            .into_iter()
            .next()
            .ok_or(TeacherError::InvalidInput {
                what: "ctc features",
                reason: "no output for one waveform".into(),
            })
    }
}

/// Reads and checks `<dir>/config.json` of a CTC teacher.
///
/// # Errors
/// [`WeightError::Io`], [`WeightError::ConfigParse`], or [`TeacherError::InvalidConfig`] when the
/// `kind` is not [`CTC_KIND`].
pub fn read_teacher_file(dir: &Path) -> Result<CtcTeacherFile, TeacherError> {
    let path: PathBuf = dir.join(CONFIG_FILE);
    let file: CtcTeacherFile = read_json(&path)?;
    if file.kind != CTC_KIND {
        return Err(TeacherError::InvalidConfig {
            field: "kind",
            reason: format!(
                "{} has kind {:?}, expected {CTC_KIND:?}",
                path.display(),
                file.kind
            ),
        });
    }
    Ok(file)
}
