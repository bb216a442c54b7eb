//! Speculative decoding over a real (tiny) transformer with its KV cache: embedding →
//! voxspec-nn `Transformer` → linear heads. The draft is SSD-style, the target's first layer
//! alone (`select_layers`) sharing embedding and output head. Ragged blocks (each sequence has
//! its own draft length and accepted length) are run padded to the longest and rolled back with
//! `KvCache::truncate_seq`; rejected drafts are rolled back the same way.
//!
//! Checks: greedy speculative (every rule) and self-speculative output equal greedy AR token for
//! token, and sampled batches equal their requests decoded one by one.

use std::sync::Arc;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_infer::{
    AcceptanceRule, ArDecoder, Decoder, Generation, InferError, LanguageModel, Limits, Logits,
    LogitsRequest, Request, SamplerConfig, SelfSpeculativeDecoder, SimilarityGroups,
    SpeculativeConfig, SpeculativeDecoder, check_blocks,
};
use voxspec_nn::{KvCache, Transformer, TransformerConfig};

/// Flex's RNG is process-global and Burn initialises parameters lazily (on first use), so a
/// test's weights depend on every draw made until then: tests of this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const VOCAB: usize = 20;
const EOS: u32 = 19;
const HEADS: usize = 3;
/// Extra cache room for the padding of ragged blocks.
const SLACK: usize = 8;

#[derive(Module, Debug)]
struct Net {
    embed: Embedding,
    stack: Transformer,
    heads: Vec<Linear>,
}

/// A network on a device, decoding through a `KvCache`.
struct Lm {
    net: Net,
    device: Device,
}

fn model_err(e: impl std::fmt::Display) -> InferError {
    InferError::Model(e.to_string())
}

impl Lm {
    /// The target: 3 layers, `HEADS` heads.
    fn target() -> Self {
        let device = Device::flex();
        device.seed(5);
        let config = TransformerConfig::tiny().with_n_layers(3).with_dropout(0.0);
        let net = Net {
            embed: EmbeddingConfig::new(VOCAB, config.d_model).init(&device),
            stack: config.init(&device).unwrap(),
            heads: (0..HEADS)
                .map(|_| LinearConfig::new(config.d_model, VOCAB).init(&device))
                .collect(),
        };
        Self { net, device }
    }

    /// A draft made of the target's layer 0, sharing its embedding and heads.
    fn first_layer_draft(&self) -> Self {
        let net = Net {
            embed: self.net.embed.clone(),
            stack: self.net.stack.select_layers(&[0]).unwrap(),
            heads: self.net.heads.clone(),
        };
        Self {
            net,
            device: self.device.clone(),
        }
    }

    /// Runs `rows` (padded with token 0 to `time`) through the cache, rolls each sequence back
    /// to `lengths[b]`, and returns the scores of every position.
    ///
    /// # Shapes
    /// - output: `[batch, time, heads, vocab]` row-major
    fn run(
        &self,
        cache: &mut KvCache,
        rows: &[Vec<u32>],
        time: usize,
        heads: usize,
        lengths: &[usize],
    ) -> voxspec_infer::Result<Vec<f32>> {
        let ids: Vec<i64> = rows
            .iter()
            .flat_map(|r| (0..time).map(move |t| i64::from(r.get(t).copied().unwrap_or(0))))
            .collect();
        // [batch, time] → [batch, time, d_model]
        let ids: Tensor<2, Int> =
            Tensor::from_data(TensorData::new(ids, [rows.len(), time]), &self.device);
        let hidden = self
            .net
            .stack
            .forward_cached(self.net.embed.forward(ids), cache)
            .map_err(model_err)?;
        for (b, &len) in lengths.iter().enumerate() {
            cache.truncate_seq(b, len).map_err(model_err)?;
        }
        // [batch, time, heads, vocab]
        let scores: Vec<Tensor<3>> = self.net.heads[..heads]
            .iter()
            .map(|h| h.forward(hidden.clone()))
            .collect();
        Tensor::stack::<4>(scores, 2)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| model_err(format!("{e:?}")))
    }
}

/// Keeps position `pick[b]` of each sequence of `[batch, time, heads, vocab]` scores.
fn pick(scores: &[f32], [batch, time, heads, vocab]: [usize; 4], pick: &[usize]) -> Vec<f32> {
    let row = heads * vocab;
    (0..batch)
        .flat_map(|b| {
            let start = (b * time + pick[b]) * row;
            scores[start..start + row].iter().copied()
        })
        .collect()
}

impl LanguageModel for Lm {
    type Prompt = Vec<u32>;
    type Cache = KvCache;

    fn vocab_size(&self) -> usize {
        VOCAB
    }
    fn n_heads(&self) -> usize {
        HEADS
    }
    fn eos_token(&self) -> Option<u32> {
        Some(EOS)
    }
    fn prompt_len(&self, prompt: &Vec<u32>) -> usize {
        prompt.len()
    }
    fn new_cache(&self, batch: usize, capacity: usize) -> voxspec_infer::Result<KvCache> {
        self.net
            .stack
            .new_cache(batch, capacity + SLACK, &self.device)
            .map_err(model_err)
    }
    fn prefill(
        &self,
        cache: &mut KvCache,
        prompts: &[Vec<u32>],
        request: LogitsRequest,
    ) -> voxspec_infer::Result<Logits> {
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
        let lengths: Vec<usize> = prompts.iter().map(Vec::len).collect();
        let scores = self.run(cache, prompts, longest, request.heads, &lengths)?;
        let last: Vec<usize> = lengths.iter().map(|l| l - 1).collect();
        let shape = [prompts.len(), longest, request.heads, VOCAB];
        Logits::new(
            pick(&scores, shape, &last),
            [prompts.len(), 1, request.heads, VOCAB],
        )
    }
    fn extend(
        &self,
        cache: &mut KvCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> voxspec_infer::Result<Logits> {
        let longest = check_blocks(blocks, cache.batch_size(), VOCAB)?;
        let lengths: Vec<usize> = blocks
            .iter()
            .zip(cache.lengths())
            .map(|(block, len)| len + block.len())
            .collect();
        let scores = self.run(cache, blocks, longest, request.heads, &lengths)?;
        let shape = [blocks.len(), longest, request.heads, VOCAB];
        if request.last_only {
            let last: Vec<usize> = blocks.iter().map(|b| b.len().max(1) - 1).collect();
            Logits::new(
                pick(&scores, shape, &last),
                [blocks.len(), 1, request.heads, VOCAB],
            )
        } else {
            Logits::new(scores, shape)
        }
    }
    fn cache_len(&self, cache: &KvCache, b: usize) -> usize {
        cache.lengths().get(b).copied().unwrap_or(0)
    }
    fn truncate(&self, cache: &mut KvCache, b: usize, len: usize) -> voxspec_infer::Result<()> {
        cache.truncate_seq(b, len).map_err(model_err)
    }
}

fn requests() -> Vec<Request<Vec<u32>>> {
    [
        (vec![1, 2, 3], 0, 14),
        (vec![4], 5, 9),
        (vec![5, 6, 7, 8, 9], 0, 12),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (prompt, min, max))| Request {
        prompt,
        limits: Limits {
            min_tokens: min,
            max_tokens: max,
        },
        seed: i as u64 + 10,
    })
    .collect()
}

fn tokens(out: &[Generation]) -> Vec<Vec<u32>> {
    out.iter().map(|g| g.tokens.clone()).collect()
}

fn rules(target: &Lm) -> Vec<AcceptanceRule> {
    // Groups from the target's own token embedding table, as `voxspec groups build` does.
    let table = target
        .net
        .embed
        .weight
        .val()
        .into_data()
        .try_into_vec::<f32>()
        .unwrap();
    let groups =
        SimilarityGroups::from_embeddings(&table, VOCAB, table.len() / VOCAB, 0.2).unwrap();
    vec![
        AcceptanceRule::Exact,
        AcceptanceRule::Tolerance { beta: 0.4 },
        AcceptanceRule::Groups(Arc::new(groups)),
    ]
}

#[test]
fn greedy_speculation_over_a_transformer_equals_greedy_ar() {
    let _serial = serial();
    let target = Lm::target();
    let greedy = SamplerConfig::greedy();
    let reference = ArDecoder.generate(&target, &requests(), &greedy).unwrap();
    for rule in rules(&target) {
        let config = SpeculativeConfig::new(2, rule).with_adaptive(4);
        let mut sd = SpeculativeDecoder::new(target.first_layer_draft(), config.clone()).unwrap();
        let out = sd.generate(&target, &requests(), &greedy).unwrap();
        assert_eq!(tokens(&out), tokens(&reference), "{}", config.name());
        let drafted: usize = out.iter().map(|g| g.stats.drafted).sum();
        let accepted: usize = out.iter().map(|g| g.stats.accepted).sum();
        eprintln!("{}: {accepted} of {drafted} drafts accepted", config.name());
        assert!(
            accepted > 0 && accepted < drafted,
            "{accepted} of {drafted}"
        );
        let self_config = SpeculativeConfig::new(2, config.rule.clone());
        let mut ss = SelfSpeculativeDecoder::new(self_config).unwrap();
        let out = ss.generate(&target, &requests(), &greedy).unwrap();
        assert_eq!(tokens(&out), tokens(&reference), "self-{}", config.name());
    }
}

#[test]
fn sampled_batches_over_a_transformer_equal_one_by_one() {
    let _serial = serial();
    let target = Lm::target();
    let sampler = SamplerConfig {
        temperature: 1.0,
        top_k: 10,
        ..SamplerConfig::default()
    };
    let config = SpeculativeConfig::new(3, AcceptanceRule::Exact);
    let mut sd = SpeculativeDecoder::new(target.first_layer_draft(), config).unwrap();
    // Self-speculation drafts from the 2 extra heads.
    let mut ss =
        SelfSpeculativeDecoder::new(SpeculativeConfig::new(2, AcceptanceRule::Exact)).unwrap();
    let batch_sd = sd.generate(&target, &requests(), &sampler).unwrap();
    let batch_ss = ss.generate(&target, &requests(), &sampler).unwrap();
    for (b, r) in requests().into_iter().enumerate() {
        let one = std::slice::from_ref(&r);
        assert_eq!(
            sd.generate(&target, one, &sampler).unwrap()[0].tokens,
            batch_sd[b].tokens
        );
        assert_eq!(
            ss.generate(&target, one, &sampler).unwrap()[0].tokens,
            batch_ss[b].tokens
        );
    }
}
