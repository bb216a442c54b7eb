//! What several commands share: the default model directories, and loading audio and models
//! with the messages a user sees.

use std::path::Path;

use anyhow::Context;
use burn::tensor::Device;
use voxspec_codec::{SOCODEC_KIND, SpeechTokenizer, SpeechTokenizerConfig, Vocoder};
use voxspec_teacher::ctc::{CTC_KIND, CtcTeacher};
use voxspec_train::weights::model_kind;

/// The CTC teacher shipped with voxspec (trained on the bundled corpus).
pub const DEFAULT_TEACHER: &str = "checkpoints/ctc-minitts";

/// The vocoder shipped with voxspec (trained on the bundled corpus).
pub(crate) const DEFAULT_VOCODER: &str = "checkpoints/vocoder-minitts";

/// The samples of an audio file at `rate` (`voxspec_audio::load_resampled`).
pub(crate) fn read_audio(path: &Path, rate: u32) -> anyhow::Result<Vec<f32>> {
    Ok(voxspec_audio::load_resampled(path, rate)
        .with_context(|| format!("{} is not readable audio", path.display()))?
        .samples)
}

/// Loads a codec model directory written by `codec train`.
pub(crate) fn load_codec(
    dir: &Path,
    device: &Device,
) -> anyhow::Result<(SpeechTokenizerConfig, SpeechTokenizer)> {
    voxspec_codec::load_codec(dir, device)
        .with_context(|| format!("loading the codec {}", dir.display()))
}

/// Whether `dir/config.json` names a SoCodec.
pub(crate) fn is_socodec(dir: &Path) -> bool {
    model_kind(dir).is_some_and(|k| k == SOCODEC_KIND)
}

/// Loads a vocoder model directory written by `vocoder train`.
pub(crate) fn load_vocoder(dir: &Path) -> anyhow::Result<Vocoder> {
    anyhow::ensure!(
        dir.is_dir(),
        "the vocoder directory {} does not exist",
        dir.display()
    );
    let device = voxspec_train::device::single()?;
    Vocoder::load(dir, &device).with_context(|| format!("loading the vocoder {}", dir.display()))
}

/// The training utterances of a prepared data directory (`train.jsonl`, which must have some)
/// and its dev utterances (`dev.jsonl`; none when absent).
pub(crate) fn train_and_dev(
    data: &Path,
) -> anyhow::Result<(Vec<voxspec_data::Utterance>, Vec<voxspec_data::Utterance>)> {
    let train = voxspec_data::read_split(data, "train")?;
    anyhow::ensure!(
        !train.is_empty(),
        "{} has no utterances",
        data.join("train.jsonl").display()
    );
    Ok((train, voxspec_data::read_split_if_present(data, "dev")?))
}

/// Whether `dir/config.json` names a CTC teacher.
pub(crate) fn is_ctc_dir(dir: &Path) -> bool {
    model_kind(dir).is_some_and(|k| k == CTC_KIND)
}

/// Loads a CTC teacher directory (`voxspec train ctc` output), refusing other kinds.
pub(crate) fn load_ctc_teacher(dir: &Path, device: &Device) -> anyhow::Result<CtcTeacher> {
    anyhow::ensure!(
        is_ctc_dir(dir),
        "{} is not a CTC teacher (config.json has no \"kind\": \"ctc\"); only CTC teachers \
         transcribe",
        dir.display()
    );
    CtcTeacher::load(dir, device)
        .with_context(|| format!("loading the CTC teacher {}", dir.display()))
}
