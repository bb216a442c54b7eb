//! A real (tiny) transformer LM behind [`LanguageModel`]: token embedding → voxspec-nn
//! `Transformer` → one linear head per MTP head, with its `KvCache`. It shows that
//! - generation through the cache equals generation that recomputes the whole sequence at every
//!   step (AR, MTP, MTP + Viterbi; greedy and seeded sampling);
//! - ragged `extend` (blocks of different lengths, empty ones included, implemented by padding
//!   and `KvCache::truncate_seq`) equals extending each sequence alone;
//! - batched generation equals one-by-one generation with the same seeds, and MTP with one head
//!   equals AR.

use std::sync::Arc;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_infer::{
    ArDecoder, Decoder, Generation, InferError, LanguageModel, Limits, Logits, LogitsRequest,
    MtpDecoder, Request, SamplerConfig, StopReason, Transitions, TransitionsConfig, ViterbiConfig,
    check_blocks,
};
use voxspec_nn::{KvCache, Transformer, TransformerConfig};

/// Flex's RNG is process-global and Burn initialises parameters lazily (on first use), so a
/// test's weights depend on every draw made until then: tests of this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const VOCAB: usize = 24;
const EOS: u32 = 23;
const HEADS: usize = 3;

/// Embedding → transformer → `HEADS` linear heads.
#[derive(Module, Debug)]
struct TinyNet {
    embed: Embedding,
    stack: Transformer,
    heads: Vec<Linear>,
}

impl TinyNet {
    fn new(device: &Device) -> Self {
        device.seed(11);
        let config = TransformerConfig::tiny();
        Self {
            embed: EmbeddingConfig::new(VOCAB, config.d_model).init(device),
            stack: config.init(device).unwrap(),
            heads: (0..HEADS)
                .map(|_| LinearConfig::new(config.d_model, VOCAB).init(device))
                .collect(),
        }
    }

    /// Token ids `[batch, time]` (rows padded to the same length) as an int tensor.
    fn ids(rows: &[Vec<u32>], time: usize, device: &Device) -> Tensor<2, Int> {
        let values: Vec<i64> = rows
            .iter()
            .flat_map(|r| (0..time).map(move |t| i64::from(r.get(t).copied().unwrap_or(0))))
            .collect();
        Tensor::from_data(TensorData::new(values, [rows.len(), time]), device)
    }

    /// Scores of the first `heads` heads.
    ///
    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `[batch, time, heads, vocab]`
    fn scores(&self, hidden: Tensor<3>, heads: usize) -> Tensor<4> {
        let per_head: Vec<Tensor<3>> = self.heads[..heads]
            .iter()
            .map(|h| h.forward(hidden.clone()))
            .collect();
        Tensor::stack(per_head, 2)
    }
}

fn host(t: Tensor<4>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// Keeps, for each sequence, position `pick[b]` of `[batch, time, heads, vocab]` scores.
fn pick_positions(
    scores: Vec<f32>,
    shape: [usize; 4],
    pick: &[usize],
) -> Result<Logits, InferError> {
    let [batch, time, heads, vocab] = shape;
    let row = heads * vocab;
    let mut data = Vec::with_capacity(batch * row);
    for (b, &p) in pick.iter().enumerate() {
        let start = (b * time + p) * row;
        data.extend_from_slice(&scores[start..start + row]);
    }
    Logits::new(data, [batch, 1, heads, vocab])
}

/// The network decoding through its KV cache.
struct Cached<'a> {
    net: &'a TinyNet,
    device: Device,
}

impl Cached<'_> {
    /// Runs blocks padded to the longest, then rolls each sequence back to its real length.
    fn run(
        &self,
        cache: &mut KvCache,
        blocks: &[Vec<u32>],
        longest: usize,
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        let old: Vec<usize> = cache.lengths().to_vec();
        // [batch, longest] → [batch, longest, d_model]
        let x = self
            .net
            .embed
            .forward(TinyNet::ids(blocks, longest, &self.device));
        let hidden = self
            .net
            .stack
            .forward_cached(x, cache)
            .map_err(|e| InferError::Model(e.to_string()))?;
        for (b, block) in blocks.iter().enumerate() {
            cache
                .truncate_seq(b, old[b] + block.len())
                .map_err(|e| InferError::Model(e.to_string()))?;
        }
        let shape = [blocks.len(), longest, request.heads, VOCAB];
        let scores = host(self.net.scores(hidden, request.heads));
        if request.last_only {
            let pick: Vec<usize> = blocks.iter().map(|b| b.len().max(1) - 1).collect();
            pick_positions(scores, shape, &pick)
        } else {
            Logits::new(scores, shape)
        }
    }
}

impl LanguageModel for Cached<'_> {
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
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache, InferError> {
        self.net
            .stack
            .new_cache(batch, capacity, &self.device)
            .map_err(|e| InferError::Model(e.to_string()))
    }
    fn prefill(
        &self,
        cache: &mut KvCache,
        prompts: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        request.check(HEADS)?;
        let longest = check_blocks(prompts, cache.batch_size(), VOCAB)?;
        let logits = self.run(
            cache,
            prompts,
            longest,
            LogitsRequest {
                last_only: false,
                ..request
            },
        )?;
        let shape = logits.shape();
        let pick: Vec<usize> = prompts.iter().map(|p| p.len() - 1).collect();
        pick_positions(logits.as_slice().to_vec(), shape, &pick)
    }
    fn extend(
        &self,
        cache: &mut KvCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        request.check(HEADS)?;
        let longest = check_blocks(blocks, cache.batch_size(), VOCAB)?;
        self.run(cache, blocks, longest, request)
    }
    fn cache_len(&self, cache: &KvCache, b: usize) -> usize {
        cache.lengths().get(b).copied().unwrap_or(0)
    }
    fn truncate(&self, cache: &mut KvCache, b: usize, len: usize) -> Result<(), InferError> {
        cache
            .truncate_seq(b, len)
            .map_err(|e| InferError::Model(e.to_string()))
    }
}

/// The same network recomputing every sequence from scratch at every call (no cache).
struct Uncached<'a> {
    net: &'a TinyNet,
    device: Device,
}

impl Uncached<'_> {
    /// Full forward over one whole sequence: `[time, heads, vocab]` scores.
    fn full(&self, tokens: &[u32], heads: usize) -> Vec<f32> {
        let x =
            self.net
                .embed
                .forward(TinyNet::ids(&[tokens.to_vec()], tokens.len(), &self.device));
        let hidden = self.net.stack.forward(x, None).unwrap();
        host(self.net.scores(hidden, heads))
    }
}

impl LanguageModel for Uncached<'_> {
    type Prompt = Vec<u32>;
    type Cache = Vec<Vec<u32>>;

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
    fn new_cache(&self, batch: usize, _capacity: usize) -> Result<Vec<Vec<u32>>, InferError> {
        Ok(vec![Vec::new(); batch])
    }
    fn prefill(
        &self,
        cache: &mut Vec<Vec<u32>>,
        prompts: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        let row = request.heads * VOCAB;
        let mut data = Vec::new();
        for (history, prompt) in cache.iter_mut().zip(prompts) {
            history.clone_from(prompt);
            let full = self.full(history, request.heads);
            data.extend_from_slice(&full[(prompt.len() - 1) * row..prompt.len() * row]);
        }
        Logits::new(data, [prompts.len(), 1, request.heads, VOCAB])
    }
    fn extend(
        &self,
        cache: &mut Vec<Vec<u32>>,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        let longest = check_blocks(blocks, cache.len(), VOCAB)?;
        let positions = if request.last_only { 1 } else { longest };
        let row = request.heads * VOCAB;
        let mut data = vec![0.0; blocks.len() * positions * row];
        for (b, (history, block)) in cache.iter_mut().zip(blocks).enumerate() {
            if block.is_empty() {
                continue;
            }
            history.extend_from_slice(block);
            let full = self.full(history, request.heads);
            let first = if request.last_only {
                history.len() - 1
            } else {
                history.len() - block.len()
            };
            let rows = &full[first * row..];
            data[b * positions * row..b * positions * row + rows.len()].copy_from_slice(rows);
        }
        Logits::new(data, [blocks.len(), positions, request.heads, VOCAB])
    }
    fn cache_len(&self, cache: &Vec<Vec<u32>>, b: usize) -> usize {
        cache[b].len()
    }
    fn truncate(&self, cache: &mut Vec<Vec<u32>>, b: usize, len: usize) -> Result<(), InferError> {
        cache[b].truncate(len);
        Ok(())
    }
}

fn requests() -> Vec<Request<Vec<u32>>> {
    [vec![1, 2, 3], vec![5], vec![7, 8, 9, 10, 11, 4]]
        .into_iter()
        .enumerate()
        .map(|(i, prompt)| Request {
            prompt,
            limits: Limits {
                min_tokens: 2 * i,
                max_tokens: 14 + 3 * i,
            },
            seed: 40 + i as u64,
        })
        .collect()
}

fn tokens(gens: &[Generation]) -> Vec<(Vec<u32>, StopReason)> {
    gens.iter().map(|g| (g.tokens.clone(), g.stop)).collect()
}

fn samplers() -> [SamplerConfig; 2] {
    [
        SamplerConfig::greedy(),
        SamplerConfig {
            temperature: 1.2,
            top_k: 12,
            ..SamplerConfig::default()
        },
    ]
}

/// Generates with `decoder` through the cache and without it and compares the tokens.
fn cached_equals_uncached<D>(decoder: &mut D, cached: &Cached, uncached: &Uncached)
where
    D: for<'a> Decoder<Cached<'a>> + for<'a> Decoder<Uncached<'a>>,
{
    let reqs = requests();
    for sampler in samplers() {
        let a = Decoder::<Cached>::generate(decoder, cached, &reqs, &sampler).unwrap();
        let b = Decoder::<Uncached>::generate(decoder, uncached, &reqs, &sampler).unwrap();
        let name = Decoder::<Cached>::name(decoder);
        assert_eq!(tokens(&a), tokens(&b), "{name} {sampler:?}");
        assert!(
            a.iter().map(|g| g.tokens.len()).sum::<usize>() > 10,
            "{name}: {a:?}"
        );
    }
}

fn transitions() -> Arc<Transitions> {
    // Stream statistics of a made-up corpus: good enough to exercise the path search.
    let seqs: Vec<Vec<u32>> = (0..20u32)
        .map(|s| (0..30).map(|t| (s * 7 + t * t) % 23).collect())
        .collect();
    Arc::new(
        Transitions::from_sequences(
            seqs.iter().map(Vec::as_slice),
            23,
            &TransitionsConfig::default(),
        )
        .unwrap(),
    )
}

#[test]
fn cached_generation_equals_uncached() {
    let _serial = serial();
    let device = Device::flex();
    let net = TinyNet::new(&device);
    let cached = Cached {
        net: &net,
        device: device.clone(),
    };
    let uncached = Uncached {
        net: &net,
        device: device.clone(),
    };
    cached_equals_uncached(&mut ArDecoder, &cached, &uncached);
    cached_equals_uncached(&mut MtpDecoder::new(3).unwrap(), &cached, &uncached);
    let mut viterbi = MtpDecoder::with_viterbi(3, ViterbiConfig::new(3), transitions()).unwrap();
    cached_equals_uncached(&mut viterbi, &cached, &uncached);
}

#[test]
fn ragged_extend_equals_one_by_one() {
    let _serial = serial();
    let device = Device::flex();
    let net = TinyNet::new(&device);
    let model = Cached {
        net: &net,
        device: device.clone(),
    };
    let prompts = vec![vec![1, 2, 3], vec![4], vec![5, 6]];
    let steps: Vec<Vec<Vec<u32>>> = vec![
        vec![vec![7, 8, 9], vec![10], vec![]],
        vec![vec![], vec![11, 12, 13, 14], vec![15, 16]],
        vec![vec![17], vec![18, 19], vec![20, 21, 22]],
    ];
    for request in [
        LogitsRequest::next_token(),
        LogitsRequest::heads_at_last(HEADS),
        LogitsRequest {
            heads: 2,
            last_only: false,
        },
    ] {
        let mut batch_cache = model.new_cache(3, 20).unwrap();
        let first = model.prefill(&mut batch_cache, &prompts, request).unwrap();
        let mut alone_caches: Vec<KvCache> =
            (0..3).map(|_| model.new_cache(1, 20).unwrap()).collect();
        for (b, cache) in alone_caches.iter_mut().enumerate() {
            let alone = model
                .prefill(cache, std::slice::from_ref(&prompts[b]), request)
                .unwrap();
            assert_close(alone.row(0, 0, 0), first.row(b, 0, 0));
        }
        for blocks in &steps {
            let batch = model.extend(&mut batch_cache, blocks, request).unwrap();
            for (b, block) in blocks.iter().enumerate() {
                if block.is_empty() {
                    continue;
                }
                let alone = model
                    .extend(&mut alone_caches[b], std::slice::from_ref(block), request)
                    .unwrap();
                let positions = if request.last_only { 1 } else { block.len() };
                for pos in 0..positions {
                    for head in 0..request.heads {
                        assert_close(alone.row(0, pos, head), batch.row(b, pos, head));
                    }
                }
                assert_eq!(batch_cache.lengths()[b], alone_caches[b].lengths()[0]);
            }
        }
    }
}

fn assert_close(a: &[f32], b: &[f32]) {
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(diff < 1e-4, "max difference {diff}");
}

#[test]
fn batch_equals_one_by_one_and_one_head_mtp_equals_ar() {
    let _serial = serial();
    let device = Device::flex();
    let net = TinyNet::new(&device);
    let model = Cached {
        net: &net,
        device: device.clone(),
    };
    let reqs = requests();
    for sampler in samplers() {
        let ar = ArDecoder.generate(&model, &reqs, &sampler).unwrap();
        let mtp1 = MtpDecoder::new(1)
            .unwrap()
            .generate(&model, &reqs, &sampler)
            .unwrap();
        assert_eq!(tokens(&ar), tokens(&mtp1), "{sampler:?}");
        for mut decoder in [
            Box::new(ArDecoder) as Box<dyn Decoder<Cached>>,
            Box::new(MtpDecoder::new(3).unwrap()),
        ] {
            let batch = decoder.generate(&model, &reqs, &sampler).unwrap();
            for (r, g) in reqs.iter().zip(&batch) {
                let alone = decoder
                    .generate(&model, std::slice::from_ref(r), &sampler)
                    .unwrap();
                assert_eq!(alone[0].tokens, g.tokens, "{} {sampler:?}", decoder.name());
                assert_eq!(alone[0].stop, g.stop);
            }
        }
    }
}
