//! The Euclidean codebook: nearest-neighbour assignment to `K` code vectors that are learnt by
//! exponential moving averages (van den Oord et al. 2017, "Neural Discrete Representation
//! Learning", appendix A.1), initialised by k-means on the first training batch and with dead
//! codes restarted from batch vectors (Zeghidour et al. 2021, "SoundStream", §3.3; Défossez
//! et al. 2022, "EnCodec", §3.2).
//!
//! The codebook state lives in four module tensors that are saved with the model and receive
//! no gradient (`require_grad = false`):
//!
//! ```text
//! embed          [K, D]  the code vectors used by encode/decode
//! embed_avg      [K, D]  EMA of the sum of the vectors assigned to each code
//! cluster_size   [K]     EMA of the number of vectors assigned to each code
//! inited         [1]     1.0 once k-means has run (or when k-means initialisation is off)
//! ```
//!
//! One EMA update ([`EuclideanCodebook::ema_update`]) on a batch `x` `[N, D]`:
//! 1. if `inited = 0`: k-means (`kmeans_iters` Lloyd iterations from `K` seeded batch samples)
//!    sets `embed = means`, `cluster_size = n_k` (cluster sizes), `embed_avg = n_k · means`,
//!    `inited = 1`;
//! 2. codes `c = argmin_k ‖x − e_k‖²` with the current `embed`;
//! 3. `cluster_size ← d·cluster_size + (1−d)·count_k`, `embed_avg ← d·embed_avg + (1−d)·Σ_{c=k} x`;
//! 4. `embed = embed_avg / ñ_k` with Laplace smoothing
//!    `ñ_k = (n_k + ε) / (Σn + K·ε) · Σn`;
//! 5. dead-code restart: with the batch-relative threshold
//!    `τ = min(threshold, share · n / K)` (`share = 0`: `τ = threshold`, EnCodec's rule), every
//!    code with `cluster_size < τ` gets a random batch vector `v` (seeded): `embed_k = v`,
//!    `cluster_size_k = s₀ = max(τ, n / K)`, `embed_avg_k = s₀ · v`. (EnCodec replaces `embed_k`
//!    before step 3 and leaves `embed_avg` alone, so step 4 of the same update undoes the
//!    restart; resetting the EMA statistics avoids that.)
//!
//! Why batch-relative: the EMA cluster size of a code settles at its mean count per batch,
//! `n / K` for a uniformly used codebook. EnCodec's absolute threshold of 2 assumes batches of
//! thousands of vectors; at 4 × 1 s of 50 Hz frames (`n = 200`) and `K = 256` every code
//! averages 0.78 and sits below 2, so nearly the whole codebook was re-drawn every update and
//! the quantization error stayed as large as the latents' spread. With `share = 0.1` a code is
//! dead once it gets less than a tenth of a uniform share, and a restarted code that wins
//! nothing keeps its place for `ln(share) / ln(d)` ≈ 230 updates (`d = 0.99`) before it is
//! re-drawn, a window in which it can attract vectors.
//!
//! Randomness comes from a [`SplitMix64`] the caller seeds (the training hook derives it from
//! the run seed and the step), so an update is a pure function of (state, batch, seed) and a
//! resumed run repeats it exactly.

use burn::config::Config;
use burn::module::{Module, Param, ParamId};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};

use crate::error::CodecError;

/// Configuration of a [`EuclideanCodebook`]. Defaults are SpeechTokenizer's (1024 codes of
/// 1024 dimensions, EMA decay 0.99, 50 k-means iterations, dead-code threshold 2), with the
/// threshold capped at a tenth of the batch's uniform share (`dead_code_share`).
#[derive(Config, Debug)]
pub struct EuclideanCodebookConfig {
    /// Dimension `D` of the code vectors.
    #[config(default = 1024)]
    pub dim: usize,
    /// Number of codes `K`.
    #[config(default = 1024)]
    pub codebook_size: usize,
    /// EMA decay `d` of `cluster_size` and `embed_avg`.
    #[config(default = 0.99)]
    pub decay: f64,
    /// Laplace smoothing `ε` of the cluster sizes.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// Initialise the codes by k-means on the first training batch (otherwise they keep their
    /// random initialisation and `inited` starts at 1).
    #[config(default = true)]
    pub kmeans_init: bool,
    /// Lloyd iterations of the k-means initialisation.
    #[config(default = 50)]
    pub kmeans_iters: usize,
    /// Codes whose EMA cluster size falls below this are restarted (0 disables restarts).
    #[config(default = 2.0)]
    pub threshold_ema_dead_code: f64,
    /// Batch-relative cap on the dead-code threshold: on a batch of `n` vectors the threshold
    /// is `min(threshold_ema_dead_code, dead_code_share · n / K)`; 0 keeps the absolute
    /// threshold alone (see the module documentation).
    #[config(default = 0.1)]
    pub dead_code_share: f64,
}

/// The non-tensor settings a codebook keeps after `init`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodebookSettings {
    /// EMA decay.
    pub decay: f64,
    /// Laplace smoothing epsilon.
    pub epsilon: f64,
    /// Lloyd iterations of the k-means initialisation.
    pub kmeans_iters: usize,
    /// Dead-code threshold on the EMA cluster size.
    pub threshold_ema_dead_code: f64,
    /// Batch-relative cap on the threshold (fraction of the uniform share `n / K`).
    pub dead_code_share: f64,
}

impl EuclideanCodebookConfig {
    /// A codebook with random codes (`N(0, 1/D)`), zero EMA statistics (`embed_avg`,
    /// `cluster_size`), and `inited = 0` when k-means initialisation is on.
    pub fn init(&self, device: &Device) -> EuclideanCodebook {
        let (k, d) = (self.codebook_size, self.dim);
        let std = 1.0 / (d.max(1) as f64).sqrt();
        let embed: Tensor<2> = Tensor::random([k, d], Distribution::Normal(0.0, std), device);
        let inited = if self.kmeans_init { 0.0 } else { 1.0 };
        EuclideanCodebook {
            embed: buffer(embed),
            embed_avg: buffer(Tensor::zeros([k, d], device)),
            cluster_size: buffer(Tensor::zeros([k], device)),
            inited: buffer(Tensor::from_data(
                TensorData::new(vec![inited], [1]),
                device,
            )),
            settings: CodebookSettings {
                decay: self.decay,
                epsilon: self.epsilon,
                kmeans_iters: self.kmeans_iters,
                threshold_ema_dead_code: self.threshold_ema_dead_code,
                dead_code_share: self.dead_code_share,
            },
        }
    }
}

/// A module tensor that is saved but never trained.
pub(crate) fn buffer<const D: usize>(value: Tensor<D>) -> Param<Tensor<D>> {
    Param::initialized(ParamId::new(), value.detach()).set_require_grad(false)
}

/// Replaces the value of buffer `param`, keeping its id and its device (autodiff or not).
pub(crate) fn replace_buffer<const D: usize>(
    param: &Param<Tensor<D>>,
    value: Tensor<D>,
) -> Param<Tensor<D>> {
    let old = param.val();
    let value = value.detach();
    let value = if old.is_autodiff() {
        value.autodiff()
    } else {
        value.without_autodiff()
    };
    Param::initialized(param.id, value).set_require_grad(false)
}

/// What one EMA update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CodebookUpdate {
    /// Whether k-means initialised the codebook in this update.
    pub initialized: bool,
    /// Codes restarted from batch vectors.
    pub restarted: usize,
}

/// A codebook of `K` vectors of dimension `D` learnt by EMA (see the module documentation).
#[derive(Module, Debug)]
pub struct EuclideanCodebook {
    /// Code vectors `[K, D]`.
    pub embed: Param<Tensor<2>>,
    /// EMA of the per-code vector sums `[K, D]`.
    pub embed_avg: Param<Tensor<2>>,
    /// EMA of the per-code assignment counts `[K]`.
    pub cluster_size: Param<Tensor<1>>,
    /// `[1]`: 1.0 once initialised.
    pub inited: Param<Tensor<1>>,
    #[module(skip)]
    settings: CodebookSettings,
}

impl EuclideanCodebook {
    /// Number of codes `K`.
    pub fn codebook_size(&self) -> usize {
        self.embed.shape().dims::<2>()[0]
    }

    /// Dimension `D` of the code vectors.
    pub fn dim(&self) -> usize {
        self.embed.shape().dims::<2>()[1]
    }

    /// The EMA settings.
    pub fn settings(&self) -> CodebookSettings {
        self.settings
    }

    /// Whether the codebook has been initialised (k-means done, or k-means init off).
    ///
    /// # Errors
    /// When the flag cannot be read back from the device.
    pub fn is_initialized(&self) -> Result<bool, CodecError> {
        let values = read_f32(self.inited.val(), "codebook inited flag")?;
        Ok(values.first().is_some_and(|v| *v > 0.5))
    }

    /// Index of the nearest code of every row.
    ///
    /// # Shapes
    /// - `x`: `[n, dim]`
    /// - returns: `[n]`, values in `0..codebook_size`
    pub fn encode(&self, x: Tensor<2>) -> Tensor<1, Int> {
        nearest(x, self.embed.val())
    }

    /// The code vectors of `codes`.
    ///
    /// # Shapes
    /// - `codes`: `[n]`
    /// - returns: `[n, dim]`
    pub fn decode(&self, codes: Tensor<1, Int>) -> Tensor<2> {
        self.embed.val().select(0, codes)
    }

    /// One EMA update of the codebook on the batch `x` (k-means first if uninitialised, then
    /// the EMA step, then dead-code restart; see the module documentation). `x` is detached.
    ///
    /// # Shapes
    /// - `x`: `[n, dim]` with `n ≥ 1`
    ///
    /// # Errors
    /// When the batch is empty or its width is not `dim`, or a value cannot be read back.
    pub fn ema_update(
        self,
        x: Tensor<2>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, CodebookUpdate), CodecError> {
        let [n, d] = x.dims();
        let k = self.codebook_size();
        if n == 0 || d != self.dim() {
            return Err(CodecError::QuantizerShape {
                what: "codebook update batch",
                expected: vec![n.max(1), self.dim()],
                found: vec![n, d],
            });
        }
        let s = self.settings;
        // The update runs without autodiff; `replace_buffer` puts the results back on the
        // buffers' own kind of device.
        let x = x.detach().without_autodiff();
        let work_device = x.device();
        let local = |p: &Param<Tensor<2>>| p.val().detach().without_autodiff();
        let mut report = CodebookUpdate::default();
        let (mut embed, mut embed_avg, mut cluster_size) = (
            local(&self.embed),
            local(&self.embed_avg),
            self.cluster_size.val().detach().without_autodiff(),
        );
        if !self.is_initialized()? {
            let (means, bins) = kmeans(x.clone(), k, s.kmeans_iters, rng);
            // embed_avg is an EMA of per-code sums, so it starts at means · sizes (EnCodec
            // starts it at the means, which shrinks the codes for the first few hundred
            // updates).
            embed_avg = means.clone() * bins.clone().reshape([k, 1]);
            embed = means;
            cluster_size = bins;
            report.initialized = true;
        }

        // EMA step.
        let codes = nearest(x.clone(), embed.clone());
        let onehot: Tensor<2> = codes.one_hot::<2>(k).float(); // [n, k]
        let counts = onehot.clone().sum_dim(0).reshape([k]); // [k]
        let sums = onehot.transpose().matmul(x.clone()); // [k, d]
        let decay = s.decay;
        cluster_size = cluster_size.mul_scalar(decay) + counts.mul_scalar(1.0 - decay);
        embed_avg = embed_avg.mul_scalar(decay) + sums.mul_scalar(1.0 - decay);
        let total = cluster_size.clone().sum(); // [1]
        let smoothed = (cluster_size.clone().add_scalar(s.epsilon))
            / total.clone().add_scalar(k as f64 * s.epsilon)
            * total; // [k]
        embed = embed_avg.clone() / smoothed.reshape([k, 1]);

        // Dead-code restart.
        let uniform_share = n as f64 / k as f64;
        let threshold = if s.dead_code_share > 0.0 {
            s.threshold_ema_dead_code
                .min(s.dead_code_share * uniform_share)
        } else {
            s.threshold_ema_dead_code
        };
        let restart_size = threshold.max(uniform_share);
        if threshold > 0.0 {
            let dead = cluster_size.clone().lower_elem(threshold).float(); // [k]
            let restarted = read_f32(dead.clone().sum(), "dead-code count")?
                .first()
                .copied()
                .unwrap_or(0.0)
                .round() as usize;
            if restarted > 0 {
                let samples = x.clone().select(0, sample_indices(n, k, rng, &work_device)); // [k, d]
                let mask = dead.clone().reshape([k, 1]);
                let keep = mask.clone().neg().add_scalar(1.0);
                embed = embed * keep.clone() + samples.clone() * mask.clone();
                embed_avg = embed_avg * keep + samples.mul_scalar(restart_size) * mask;
                cluster_size = cluster_size * dead.clone().neg().add_scalar(1.0)
                    + dead.mul_scalar(restart_size);
                report.restarted = restarted;
            }
        }
        let inited = Tensor::ones([1], &work_device);
        let updated = Self {
            embed: replace_buffer(&self.embed, embed),
            embed_avg: replace_buffer(&self.embed_avg, embed_avg),
            cluster_size: replace_buffer(&self.cluster_size, cluster_size),
            inited: replace_buffer(&self.inited, inited),
            settings: self.settings,
        };
        Ok((updated, report))
    }
}

/// Index of the nearest row of `embed` `[k, d]` for every row of `x` `[n, d]`:
/// `argmax_k (2·x·e_k − ‖e_k‖²)` (the `‖x‖²` term is constant per row).
pub(crate) fn nearest(x: Tensor<2>, embed: Tensor<2>) -> Tensor<1, Int> {
    let [n, _] = x.dims();
    let [k, _] = embed.dims();
    let e_sq = embed.clone().square().sum_dim(1).reshape([1, k]); // [1, k]
    let scores = x.matmul(embed.transpose()).mul_scalar(2.0) - e_sq; // [n, k]
    scores.argmax(1).reshape([n])
}

/// k-means with `iters` Lloyd iterations from `k` seeded samples of `x` `[n, d]`; returns the
/// means `[k, d]` and the size of each final cluster `[k]`. An empty cluster keeps its mean.
pub(crate) fn kmeans(
    x: Tensor<2>,
    k: usize,
    iters: usize,
    rng: &mut SplitMix64,
) -> (Tensor<2>, Tensor<1>) {
    let [n, _] = x.dims();
    let device = x.device();
    let mut means = x.clone().select(0, sample_indices(n, k, rng, &device)); // [k, d]
    let mut bins: Tensor<1> = Tensor::zeros([k], &device);
    for _ in 0..iters.max(1) {
        let onehot: Tensor<2> = nearest(x.clone(), means.clone()).one_hot::<2>(k).float(); // [n, k]
        bins = onehot.clone().sum_dim(0).reshape([k]);
        let sums = onehot.transpose().matmul(x.clone()); // [k, d]
        let empty = bins.clone().lower_equal_elem(0.0).float().reshape([k, 1]); // [k, 1]
        let new_means = sums / bins.clone().clamp_min(1.0).reshape([k, 1]);
        means = means * empty.clone() + new_means * empty.neg().add_scalar(1.0);
    }
    (means, bins)
}

/// `k` row indices into `n` rows: a seeded permutation prefix when `n ≥ k`, else draws with
/// replacement.
fn sample_indices(n: usize, k: usize, rng: &mut SplitMix64, device: &Device) -> Tensor<1, Int> {
    let indices: Vec<i64> = if n >= k {
        let mut all: Vec<i64> = (0..n as i64).collect();
        for i in 0..k {
            let j = i + rng.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    } else {
        (0..k).map(|_| rng.below(n) as i64).collect()
    };
    Tensor::from_data(TensorData::new(indices, [k]), device)
}

/// Reads a float tensor back to the host.
pub(crate) fn read_f32<const D: usize>(
    t: Tensor<D>,
    what: &'static str,
) -> Result<Vec<f32>, CodecError> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| CodecError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}

/// SplitMix64 (Steele et al. 2014): the small, seedable generator behind k-means
/// initialisation and dead-code restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The visiting order of `n` items in `epoch` of a data plan seeded with `seed`: a
    /// Fisher-Yates shuffle, the same for the same `(seed, epoch)`.
    pub fn epoch_order(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = Self::new(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for i in (1..n).rev() {
            order.swap(i, rng.below(i + 1));
        }
        order
    }

    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n ≥ 1`; 0 when `n = 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: bias below 2^-32 for the sizes used here.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_deterministic_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..100 {
            let (x, y) = (a.below(13), b.below(13));
            assert_eq!(x, y);
            assert!(x < 13);
        }
        let mut seen = [false; 5];
        let mut r = SplitMix64::new(1);
        for _ in 0..200 {
            seen[r.below(5)] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn sample_indices_are_distinct_when_possible() {
        let device = Device::flex();
        let mut rng = SplitMix64::new(3);
        let idx = sample_indices(10, 10, &mut rng, &device)
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .unwrap();
        let mut sorted = idx.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<i64>>());
    }
}
