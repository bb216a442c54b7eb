//! Decoders by specification: [`DecoderSpec`] names a decoder and its settings (what a
//! benchmark row measures), [`DecoderParts`] holds what some of them need besides the target
//! model (a draft, the transition matrix, PCG's similarity groups), and
//! [`DecoderParts::build`] makes the decoder.

use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;
use serde::Serialize;
use voxspec_infer::verify::AcceptanceRule;
use voxspec_infer::{
    ArDecoder, Decoder, LanguageModel, MtpDecoder, SelfSpeculativeDecoder, SimilarityGroups,
    SpeculativeConfig, SpeculativeDecoder, Transitions, ViterbiConfig, groups_of_mean_size,
};
use voxspec_mtp::{MtpModel, load_mtp};

use crate::engine::{ArEngine, EngineKind};
use crate::error::{Result, TtsError};
use crate::pipeline::{ModelPaths, Pipeline};

/// How drafted tokens are accepted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "lowercase")]
pub enum RuleSpec {
    /// Exact speculative sampling.
    Sd,
    /// SSD tolerance β.
    Ssd {
        /// The tolerance (0: exact).
        beta: f32,
    },
    /// PCG groups at cosine threshold θ.
    Pcg {
        /// The threshold the groups were built at.
        theta: f32,
    },
}

/// One decoder configuration: what a benchmark row measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decoder", rename_all = "kebab-case")]
pub enum DecoderSpec {
    /// One token per forward (the baseline).
    Ar,
    /// `heads` tokens per forward, each head sampled on its own.
    Mtp {
        /// Prediction heads used.
        heads: usize,
    },
    /// `heads` tokens per forward, the block chosen by Viterbi over the `top_k` candidates of
    /// each head and the transition matrix (the MTP paper's Algorithm 1).
    MtpViterbi {
        /// Prediction heads used.
        heads: usize,
        /// Candidates per head.
        top_k: usize,
    },
    /// A separate draft model proposes `gamma` tokens.
    Speculative {
        /// How drafted tokens are accepted.
        #[serde(flatten)]
        rule: RuleSpec,
        /// Tokens drafted per verification.
        gamma: usize,
    },
    /// The MTP heads propose `gamma` tokens.
    SelfSpec {
        /// How drafted tokens are accepted.
        #[serde(flatten)]
        rule: RuleSpec,
        /// Tokens drafted per verification (the model needs `gamma + 1` heads).
        gamma: usize,
    },
}

impl RuleSpec {
    /// The rule's name on the command line: `sd`, `ssd` or `pcg`.
    pub fn name(&self) -> &'static str {
        match self {
            RuleSpec::Sd => "sd",
            RuleSpec::Ssd { .. } => "ssd",
            RuleSpec::Pcg { .. } => "pcg",
        }
    }
}

impl DecoderSpec {
    /// Short label for tables and plots.
    pub fn label(&self) -> String {
        let rule = |r: &RuleSpec| match r {
            RuleSpec::Sd => "sd".to_string(),
            RuleSpec::Ssd { beta } => format!("ssd β={beta}"),
            RuleSpec::Pcg { theta } => format!("pcg θ={theta:.3}"),
        };
        match self {
            DecoderSpec::Ar => "ar".into(),
            DecoderSpec::Mtp { heads } => format!("mtp k={heads}"),
            DecoderSpec::MtpViterbi { heads, top_k } => {
                format!("mtp+viterbi k={heads} top_k={top_k}")
            }
            DecoderSpec::Speculative { rule: r, gamma } => format!("{} γ={gamma}", rule(r)),
            DecoderSpec::SelfSpec { rule: r, gamma } => {
                format!("self-spec {} γ={gamma}", rule(r))
            }
        }
    }
}

/// What decoders may need besides the target model.
#[derive(Default)]
pub struct DecoderParts {
    /// Stream-0 transition matrix (Viterbi rows).
    pub transitions: Option<Arc<Transitions>>,
    /// The draft on the same engine as the target (separate-draft speculative rows).
    pub draft: Option<ArEngine>,
    /// Similarity groups of each PCG threshold θ.
    pub groups: Vec<(f32, Arc<SimilarityGroups>)>,
}

/// Loads the draft model at `dir` onto the engine `engine` and checks that it predicts
/// `target`'s tokens.
///
/// # Errors
/// [`TtsError::Load`] naming the directory; [`TtsError::Incompatible`] for a draft of another
/// codebook.
pub fn load_draft(
    dir: &Path,
    target: &MtpModel,
    engine: EngineKind,
    device: &Device,
) -> Result<ArEngine> {
    let (file, draft) = load_mtp(dir, device).map_err(TtsError::load("the draft", dir))?;
    if draft.codebook_size() != target.codebook_size() {
        return Err(TtsError::Incompatible(format!(
            "the draft {} predicts {} tokens, the target {} — a draft must share its target's \
             codebook",
            dir.display(),
            draft.codebook_size() + 1,
            target.codebook_size() + 1
        )));
    }
    ArEngine::new(engine, &draft, &file.model)
        .map_err(TtsError::load("the draft onto the native engine", dir))
}

impl DecoderParts {
    /// Loads the transition matrix of the Viterbi decoders, its `log Q` scaled by `weight`
    /// ([`Transitions::with_weight`]; 1: as estimated).
    ///
    /// # Errors
    /// [`TtsError::Load`] naming the file (or the bad weight).
    pub fn load_transitions(&mut self, path: &Path, weight: f32) -> Result<()> {
        let transitions = Transitions::load(path)
            .and_then(|t| t.with_weight(weight))
            .map_err(TtsError::load("the transition matrix", path))?;
        self.transitions = Some(Arc::new(transitions));
        Ok(())
    }

    /// Builds PCG's similarity groups from `target`'s code embeddings — at `theta`, or at the θ
    /// whose groups have a mean size of `mean_size` (a fixed θ does not carry over between
    /// models) — keeps them, and returns them with the rule that uses them. Groups already
    /// built at the same θ are reused.
    ///
    /// # Errors
    /// The model's or the group builder's, for an out-of-range θ or mean size.
    pub fn add_groups(
        &mut self,
        target: &MtpModel,
        at: GroupsAt,
    ) -> Result<(RuleSpec, Arc<SimilarityGroups>)> {
        let (table, vocab, dim) = target.code_embeddings()?;
        let groups = match at {
            GroupsAt::Theta(theta) => SimilarityGroups::from_embeddings(&table, vocab, dim, theta)?,
            GroupsAt::MeanSize(size) => groups_of_mean_size(&table, vocab, dim, size)?,
        };
        let theta = groups.theta();
        if let Ok(existing) = self.groups_at(theta) {
            return Ok((RuleSpec::Pcg { theta }, existing));
        }
        let groups = Arc::new(groups);
        self.groups.push((theta, groups.clone()));
        Ok((RuleSpec::Pcg { theta }, groups))
    }

    fn groups_at(&self, theta: f32) -> Result<Arc<SimilarityGroups>> {
        self.groups
            .iter()
            .find(|(t, _)| (t - theta).abs() < 1e-6)
            .map(|(_, g)| g.clone())
            .ok_or_else(|| TtsError::Decoder {
                spec: format!("pcg θ={theta:.3}"),
                reason: format!("no similarity groups built for θ = {theta}"),
            })
    }

    fn rule(&self, spec: &RuleSpec) -> Result<AcceptanceRule> {
        Ok(match spec {
            RuleSpec::Sd => AcceptanceRule::Exact,
            RuleSpec::Ssd { beta } => AcceptanceRule::Tolerance { beta: *beta },
            RuleSpec::Pcg { theta } => AcceptanceRule::Groups(self.groups_at(*theta)?),
        })
    }

    /// The decoder of `spec` for `target`.
    ///
    /// # Errors
    /// [`TtsError::Decoder`] naming what the decoder lacks (heads, a draft, the transition
    /// matrix, groups) or a setting it refuses.
    pub fn build(
        &self,
        spec: &DecoderSpec,
        target: &ArEngine,
    ) -> Result<Box<dyn Decoder<ArEngine>>> {
        let refuse = |reason: String| TtsError::Decoder {
            spec: spec.label(),
            reason,
        };
        let heads_needed = match spec {
            DecoderSpec::Mtp { heads } | DecoderSpec::MtpViterbi { heads, .. } => *heads,
            DecoderSpec::SelfSpec { gamma, .. } => gamma + 1,
            _ => 1,
        };
        if heads_needed > target.n_heads() {
            return Err(refuse(format!(
                "needs {heads_needed} prediction heads; the AR model has {} (train it with \
                 --heads {heads_needed} or more)",
                target.n_heads()
            )));
        }
        let invalid = |e: voxspec_infer::InferError| refuse(e.to_string());
        Ok(match spec {
            DecoderSpec::Ar => Box::new(ArDecoder::new()),
            DecoderSpec::Mtp { heads } => Box::new(MtpDecoder::new(*heads).map_err(invalid)?),
            DecoderSpec::MtpViterbi { heads, top_k } => {
                let transitions = self.transitions.clone().ok_or_else(|| {
                    refuse(
                        "Viterbi decoding needs the transition matrix (`voxspec stats \
                         transitions`, --transitions)"
                            .into(),
                    )
                })?;
                // The outputs are the codes and EOS.
                let codebook = target.vocab_size() - 1;
                if transitions.vocab_size() != codebook + 1 && transitions.vocab_size() != codebook
                {
                    return Err(refuse(format!(
                        "the transition matrix covers {} tokens, the AR model has {codebook} codes",
                        transitions.vocab_size(),
                    )));
                }
                Box::new(
                    MtpDecoder::with_viterbi(*heads, ViterbiConfig::new(*top_k), transitions)
                        .map_err(invalid)?,
                )
            }
            DecoderSpec::Speculative { rule, gamma } => {
                let draft = self.draft.clone().ok_or_else(|| {
                    refuse("speculative decoding needs a draft model (--draft)".into())
                })?;
                Box::new(
                    SpeculativeDecoder::new(
                        draft,
                        SpeculativeConfig::new(*gamma, self.rule(rule)?),
                    )
                    .map_err(invalid)?,
                )
            }
            DecoderSpec::SelfSpec { rule, gamma } => Box::new(
                SelfSpeculativeDecoder::new(SpeculativeConfig::new(*gamma, self.rule(rule)?))
                    .map_err(invalid)?,
            ),
        })
    }
}

/// Where PCG's similarity threshold comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupsAt {
    /// A fixed cosine threshold θ in (−1, 1).
    Theta(f32),
    /// The θ whose groups have this mean size (the PCG paper's ablation uses 4.5 and 10.3).
    MeanSize(f64),
}

/// Where [`DecoderParts::prepare`] finds what a decoder needs besides the target model.
#[derive(Debug, Clone, Copy)]
pub struct PartSources<'a> {
    /// The models (the transition matrix file, the engine a draft runs on).
    pub paths: &'a ModelPaths,
    /// Weight of the transition matrix's log-probabilities ([`DecoderParts::load_transitions`]).
    pub transition_weight: f32,
    /// The draft model directory of separate-draft speculative decoders.
    pub draft: Option<&'a Path>,
    /// Where PCG's threshold comes from.
    pub groups: GroupsAt,
}

/// A decoder specification with the parts it needs loaded.
pub struct PreparedDecoder {
    /// The specification (a PCG rule carries the θ its groups were built at).
    pub spec: DecoderSpec,
    /// Its parts; [`DecoderParts::build`] makes the decoder.
    pub parts: DecoderParts,
    /// PCG's similarity groups, when built.
    pub groups: Option<Arc<SimilarityGroups>>,
}

impl DecoderParts {
    /// Loads what `spec` needs for `pipeline`'s AR model: the transition matrix of a Viterbi
    /// decoder, the draft of a separate-draft speculative decoder, and PCG's similarity groups
    /// (the θ in a PCG `spec` is replaced by the one they were built at).
    ///
    /// # Errors
    /// [`TtsError::Decoder`] for a speculative `spec` without a draft directory; as
    /// [`Self::load_transitions`], [`load_draft`] and [`Self::add_groups`].
    pub fn prepare(
        spec: DecoderSpec,
        pipeline: &Pipeline,
        sources: &PartSources<'_>,
        device: &Device,
    ) -> Result<PreparedDecoder> {
        let mut parts = DecoderParts::default();
        if matches!(spec, DecoderSpec::MtpViterbi { .. }) {
            parts.load_transitions(&sources.paths.transitions, sources.transition_weight)?;
        }
        let mut groups = None;
        let spec = match spec {
            DecoderSpec::Speculative { rule, gamma } => {
                let dir = sources.draft.ok_or_else(|| TtsError::Decoder {
                    spec: rule.name().into(),
                    reason: "needs a draft model (--draft DIR)".into(),
                })?;
                parts.draft = Some(load_draft(dir, &pipeline.ar, sources.paths.engine, device)?);
                let rule = match rule {
                    RuleSpec::Pcg { .. } => {
                        let (rule, built) = parts.add_groups(&pipeline.ar, sources.groups)?;
                        groups = Some(built);
                        rule
                    }
                    other => other,
                };
                DecoderSpec::Speculative { rule, gamma }
            }
            other => other,
        };
        Ok(PreparedDecoder {
            spec,
            parts,
            groups,
        })
    }
}
