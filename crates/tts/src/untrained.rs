//! An untrained experiment for tests and examples: its speech is noise, but every stage of the
//! pipeline runs on it exactly as on a trained one.

use std::path::Path;

use burn::tensor::Device;
use voxspec_codec::load_codec;
use voxspec_data::{Normalization, TextTokenizer, TokenizerKind};
use voxspec_mtp::{MtpConfig, MtpFile, NarConfig, save_mtp, save_nar};

use crate::error::{Result, TtsError};
use crate::pipeline::ModelPaths;

/// Writes a tiny untrained AR model (4 MTP heads, phoneme tokenizer) and NAR model under `dir`
/// (`ar/`, `nar/`) that fit the codec at `codec`, and returns the paths of the experiment.
/// There is no transition matrix (Viterbi decoders cannot be built on it).
///
/// # Errors
/// [`TtsError::Load`] for a codec that cannot be loaded; the writers' errors naming the file.
pub fn write_untrained_experiment(dir: &Path, codec: &Path, device: &Device) -> Result<ModelPaths> {
    let (config, _) = load_codec(codec, device).map_err(TtsError::load("the codec", codec))?;
    let tokenizer = TextTokenizer::train(
        Vec::<String>::new(),
        TokenizerKind::Phoneme,
        &Normalization::default(),
    )?;
    let mut paths = ModelPaths::experiment(dir);
    paths.codec = codec.to_path_buf();
    let write = |e: voxspec_mtp::MtpError| TtsError::Stage {
        stage: "writing the untrained experiment",
        source: Box::new(e),
    };
    let ar = MtpConfig::tiny(tokenizer.vocab_size(), config.codebook_size);
    let file = MtpFile {
        model: ar.clone(),
        draft: None,
    };
    save_mtp(&paths.ar, &file, &ar.init(device)?).map_err(write)?;
    tokenizer.save(&paths.ar.join("tokenizer.json"))?;
    let nar = NarConfig::tiny(tokenizer.vocab_size(), config.codebook_size, config.n_q);
    save_nar(&paths.nar, &nar, &nar.init(device)?).map_err(write)?;
    Ok(paths)
}
