//! An untrained experiment for tests and examples: its speech is noise, but every stage of the
//! pipeline runs on it exactly as on a trained one.

use std::path::Path;

use burn::tensor::Device;
use voxspec_codec::{
    QuantizerKind, SoCodecConfig, VocosConfig, load_codec, save_socodec, save_vocoder,
};
use voxspec_data::{Normalization, TextTokenizer, TokenizerKind};
use voxspec_mtp::{MtpConfig, MtpFile, NarConfig, save_mtp, save_nar};
use voxspec_multistream::{MsFile, MsMtpConfig, MultiStreamConfig, save_multistream};

use crate::engine::EngineKind;
use crate::error::{Result, TtsError};
use crate::multistream::MultiStreamPaths;
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

/// Writes an untrained multi-stream experiment under `dir`, every model tiny and random: a
/// SoCodec (`codec/`: 2 streams of 16 tokens, 40 ms frames, 16 kHz, 10 mel bands), a vocoder
/// of its log-mel (`vocoder/`), and a multi-stream LM (`lm/`: 2 MTP heads, no transition
/// matrices, a phoneme tokenizer, its `config.json` naming the codec). Returns the paths (the
/// native engine). Each LM frame is 640 samples of audio.
///
/// # Errors
/// The models' own checks and the writers' errors, naming the file.
pub fn write_untrained_multistream(dir: &Path, device: &Device) -> Result<MultiStreamPaths> {
    let vocoder = VocosConfig::hop160()
        .with_n_mels(10)
        .with_dim(16)
        .with_intermediate_dim(32)
        .with_n_layers(1);
    let codec = SoCodecConfig::new()
        .with_feature_dim(6)
        .with_frame_ms(40)
        .with_channels(8)
        .with_latent_dim(16)
        .with_streams(2)
        .with_sub_codebook_size(4)
        .with_rq_codebook_dim(Some(4))
        .with_kmeans_iters(2)
        .with_global_channels(8)
        .with_mel(vocoder.mel_config())
        .with_clip_frames(20)
        .with_quantizer(QuantizerKind::Opq);
    let codec_dir = dir.join("codec");
    let codec_model = codec.init(device)?;
    save_socodec(&codec_dir, &codec, &codec_model)
        .map_err(TtsError::stage("writing the untrained codec"))?;
    let vocoder_dir = dir.join("vocoder");
    let vocoder_model = vocoder
        .init(device)
        .map_err(TtsError::stage("building the untrained vocoder"))?;
    save_vocoder(&vocoder_dir, &vocoder, &vocoder_model)
        .map_err(TtsError::stage("writing the untrained vocoder"))?;
    let tokenizer = TextTokenizer::train(
        Vec::<String>::new(),
        TokenizerKind::Phoneme,
        &Normalization::default(),
    )?;
    let mut lm =
        MultiStreamConfig::tiny(tokenizer.vocab_size(), codec.stream_vocab(), codec.streams)
            .with_global_dim(codec.latent_dim)
            .with_mtp(Some(MsMtpConfig::new(2)));
    lm.transformer.max_seq_len = 128;
    let lm_dir = dir.join("lm");
    let file = MsFile {
        model: lm.clone(),
        codec: Some(codec_dir.display().to_string()),
        draft: None,
    };
    save_multistream(&lm_dir, &file, &lm.init(device)?)?;
    tokenizer.save(&lm_dir.join("tokenizer.json"))?;
    Ok(MultiStreamPaths {
        model: lm_dir,
        codec: None,
        vocoder: Some(vocoder_dir),
        engine: EngineKind::default(),
    })
}
