//! Codes as synthesis hands them to the codec decoder: each recording's RVQ-1 codes with layers
//! 2..N filled in by the pipeline's NAR model (the engine synthesis runs, told the recording's
//! phone durations when the NAR is aligned). A codec decoder trained on them
//! (`voxspec codec train --decoder-only --decoder-codes`) learns the codes it is given at
//! synthesis time rather than its encoder's, whose upper layers no NAR reproduces.

use std::path::Path;

use burn::data::dataset::Dataset;
use serde::{Deserialize, Serialize};
use voxspec_data::{
    Codes, MissingCodes, Progress, TokenStore, TokenStoreWriter, TtsDataset, Utterance,
};

use crate::error::{Result, TtsError};
use crate::pipeline::Pipeline;

/// What [`Pipeline::fill_split`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FillReport {
    /// Utterances written.
    pub utterances: usize,
    /// Frames written.
    pub frames: usize,
    /// Per code layer, the share of frames whose filled code equals the recording's (1 for
    /// RVQ-1, which is kept).
    pub equal: Vec<f64>,
}

impl Pipeline {
    /// Writes split `split` of a token store into `out`: for every utterance of `utterances`
    /// with codes in `codes` (a store of this pipeline's codec), its RVQ-1 codes and the NAR's
    /// layers 2..N for them. Utterances without codes are skipped.
    ///
    /// # Errors
    /// [`TtsError::Incompatible`] for a store of another shape than the NAR's; the data's
    /// (tokenising, the alignment, writing) and the NAR's.
    pub fn fill_split(
        &self,
        utterances: &[Utterance],
        codes: &TokenStore,
        out: &Path,
        split: &str,
        progress: &dyn Progress,
    ) -> Result<FillReport> {
        let n_q = self.nar.n_q();
        let meta = codes.meta();
        if meta.n_q != n_q || meta.codebook_size as usize != self.nar.codebook_size() {
            return Err(TtsError::Incompatible(format!(
                "the token store holds {} × {} codes, the NAR model {n_q} × {}",
                meta.n_q,
                meta.codebook_size,
                self.nar.codebook_size()
            )));
        }
        let items = TtsDataset::new(utterances, &self.tokenizer, codes, MissingCodes::Skip)?;
        let mut writer = TokenStoreWriter::new(out, split, meta, 200_000)?;
        let (mut equal, mut frames) = (vec![0usize; n_q], 0usize);
        progress.start(items.len() as u64, split);
        for i in 0..items.len() {
            let item = items.get(i)?;
            let layers: Vec<Vec<u32>> = (0..n_q).map(|q| item.codes.stream(q).to_vec()).collect();
            let n = layers[0].len();
            let (nar_text, prompt_codes) = self.nar_inputs(&item.text, None, n)?;
            let track = self.nar_track(&item.text, item.durations.as_deref(), n);
            let filled = self.nar_layers(
                &nar_text,
                &prompt_codes,
                &layers[0],
                track.as_deref(),
                self.nar.n_q(),
            )?;
            for (q, (mine, theirs)) in filled.iter().zip(&layers).enumerate() {
                equal[q] += mine.iter().zip(theirs).filter(|(a, b)| a == b).count();
            }
            frames += n;
            writer.push(&item.id, Codes::new(n_q, n, filled.concat())?)?;
            progress.inc(1);
        }
        writer.finish()?;
        progress.finish();
        Ok(FillReport {
            utterances: items.len(),
            frames,
            equal: equal
                .iter()
                .map(|&e| e as f64 / frames.max(1) as f64)
                .collect(),
        })
    }
}
