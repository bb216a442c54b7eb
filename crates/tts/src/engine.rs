//! Which implementation runs the AR model and the draft — Burn's flex backend (or the device the
//! model was loaded on) or the native CPU engine (`voxspec-engine`), built from the same loaded
//! model; [`ArEngine`] lets every decoder drive either.

use std::sync::Arc;

use serde::Serialize;
use voxspec_engine::{EngineError, NativeCache, NativeMtp, WeightFormat};
use voxspec_infer::{InferError, LanguageModel, Logits, LogitsRequest};
use voxspec_mtp::{MtpCache, MtpConfig, MtpModel, TtsPrompt};

/// The implementation that runs the AR model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Burn (flex on the CPU, or the selected device).
    Burn,
    /// voxspec-engine: native f32 kernels on the CPU.
    #[default]
    Native,
    /// voxspec-engine with bf16 linear weights (half the bytes per step; f32 arithmetic).
    #[serde(rename = "native-bf16")]
    #[cfg_attr(feature = "clap", value(name = "native-bf16"))]
    NativeBf16,
    /// voxspec-engine with int8 linear weights, one scale per output column (a quarter of the
    /// bytes per step; f32 activations and arithmetic).
    #[serde(rename = "native-int8")]
    #[cfg_attr(feature = "clap", value(name = "native-int8"))]
    NativeInt8,
}

impl EngineKind {
    /// The native engine's weight format (`None` for Burn).
    pub fn weight_format(self) -> Option<WeightFormat> {
        match self {
            EngineKind::Burn => None,
            EngineKind::Native => Some(WeightFormat::F32),
            EngineKind::NativeBf16 => Some(WeightFormat::Bf16),
            EngineKind::NativeInt8 => Some(WeightFormat::Int8),
        }
    }

    /// The name `--engine` takes (and the JSON reports).
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Burn => "burn",
            EngineKind::Native => "native",
            EngineKind::NativeBf16 => "native-bf16",
            EngineKind::NativeInt8 => "native-int8",
        }
    }
}

/// The AR model behind `--engine`: decoders drive either implementation through one type.
/// Clones share the weights (Burn's parameters, the engine behind an `Arc`).
// One or two per run: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum ArEngine {
    /// The Burn model itself.
    Burn(MtpModel),
    /// The native engine built from it.
    Native(Arc<NativeMtp>),
}

/// The decoding state of an [`ArEngine`].
// One per decoding call.
#[allow(clippy::large_enum_variant)]
pub enum ArCache {
    /// Burn's KV cache.
    Burn(MtpCache),
    /// The native engine's.
    Native(NativeCache),
}

impl ArEngine {
    /// `model` (built from `config`) on the engine `kind`.
    ///
    /// # Errors
    /// The native engine's, when it cannot take the model's weights.
    pub fn new(
        kind: EngineKind,
        model: &MtpModel,
        config: &MtpConfig,
    ) -> Result<Self, EngineError> {
        Ok(match kind.weight_format() {
            None => ArEngine::Burn(model.clone()),
            Some(format) => {
                ArEngine::Native(Arc::new(NativeMtp::from_burn_with(model, config, format)?))
            }
        })
    }

    /// The `--engine` name of this implementation.
    pub fn kind(&self) -> EngineKind {
        match self {
            ArEngine::Burn(_) => EngineKind::Burn,
            ArEngine::Native(m) => match m.weight_format() {
                WeightFormat::F32 => EngineKind::Native,
                WeightFormat::Bf16 => EngineKind::NativeBf16,
                WeightFormat::Int8 => EngineKind::NativeInt8,
            },
        }
    }
}

fn other_engine() -> InferError {
    InferError::Model("a cache of the other engine was passed".into())
}

/// Forwards to the variant's own `LanguageModel` implementation.
macro_rules! both {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            ArEngine::Burn($m) => $e,
            ArEngine::Native($m) => $e,
        }
    };
}

impl LanguageModel for ArEngine {
    type Prompt = TtsPrompt;
    type Cache = ArCache;

    fn vocab_size(&self) -> usize {
        both!(self, m => m.vocab_size())
    }

    fn n_heads(&self) -> usize {
        // MtpModel's inherent `n_heads` is its trait method's value.
        both!(self, m => m.n_heads())
    }

    fn eos_token(&self) -> Option<u32> {
        both!(self, m => m.eos_token())
    }

    fn prompt_len(&self, prompt: &TtsPrompt) -> usize {
        both!(self, m => m.prompt_len(prompt))
    }

    fn new_cache(&self, batch: usize, capacity: usize) -> Result<ArCache, InferError> {
        Ok(match self {
            ArEngine::Burn(m) => ArCache::Burn(m.new_cache(batch, capacity)?),
            ArEngine::Native(m) => ArCache::Native(m.new_cache(batch, capacity)?),
        })
    }

    fn prefill(
        &self,
        cache: &mut ArCache,
        prompts: &[TtsPrompt],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        match (self, cache) {
            (ArEngine::Burn(m), ArCache::Burn(c)) => m.prefill(c, prompts, request),
            (ArEngine::Native(m), ArCache::Native(c)) => m.prefill(c, prompts, request),
            _ => Err(other_engine()),
        }
    }

    fn extend(
        &self,
        cache: &mut ArCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        match (self, cache) {
            (ArEngine::Burn(m), ArCache::Burn(c)) => m.extend(c, blocks, request),
            (ArEngine::Native(m), ArCache::Native(c)) => m.extend(c, blocks, request),
            _ => Err(other_engine()),
        }
    }

    fn cache_len(&self, cache: &ArCache, b: usize) -> usize {
        match (self, cache) {
            (ArEngine::Burn(m), ArCache::Burn(c)) => m.cache_len(c, b),
            (ArEngine::Native(m), ArCache::Native(c)) => m.cache_len(c, b),
            _ => 0,
        }
    }

    fn truncate(&self, cache: &mut ArCache, b: usize, len: usize) -> Result<(), InferError> {
        match (self, cache) {
            (ArEngine::Burn(m), ArCache::Burn(c)) => m.truncate(c, b, len),
            (ArEngine::Native(m), ArCache::Native(c)) => m.truncate(c, b, len),
            _ => Err(other_engine()),
        }
    }
}
